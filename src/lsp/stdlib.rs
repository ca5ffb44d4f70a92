//! The stdlib is embedded in the binary (`check::STDLIB`). To let any editor open a stdlib
//! module on go-to-definition, the server writes each module once, read-only, to
//! `$TMPDIR/warden-<version>-stdlib/std/<name>.ward` and hands out `file:` URIs to it.

use std::path::PathBuf;

use lsp_types::Url;

use crate::check::STDLIB;

/// The folder the stdlib is written to.
pub fn dir() -> PathBuf {
    std::env::temp_dir().join(format!("warden-{}-stdlib", env!("CARGO_PKG_VERSION")))
}

/// The path of a stdlib module (`std.taint`), written if missing or stale.
pub fn path(module: &str) -> Option<PathBuf> {
    let (_, text) = STDLIB.iter().find(|(n, _)| *n == module)?;
    let short = module.strip_prefix("std.")?;
    let path = dir().join("std").join(format!("{short}.ward"));
    let current = std::fs::read_to_string(&path).ok();
    if current.as_deref() != Some(*text) {
        let parent = path.parent()?;
        std::fs::create_dir_all(parent).ok()?;
        // A previous version may have left it read-only.
        if let Ok(meta) = std::fs::metadata(&path) {
            let mut perms = meta.permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            let _ = std::fs::set_permissions(&path, perms);
        }
        std::fs::write(&path, text).ok()?;
        if let Ok(meta) = std::fs::metadata(&path) {
            let mut perms = meta.permissions();
            perms.set_readonly(true);
            let _ = std::fs::set_permissions(&path, perms);
        }
    }
    Some(path)
}

pub fn uri(module: &str) -> Option<Url> {
    Url::from_file_path(path(module)?).ok()
}
