//! Loading a policy: read the root file, parse it, and follow its `use`s to the stdlib (embedded
//! in the binary) and to sibling modules on disk. Every file becomes a [`Unit`].

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::diagnostics::{did_you_mean, Code, Diagnostic, FileId, SourceFile, SourceMap, Span};
use crate::syntax::{self, ast};

/// The stdlib, compiled into the binary so `warden` needs no files beside it.
pub const STDLIB: &[(&str, &str)] = &[
    ("std.taint", include_str!("../../stdlib/taint.ward")),
    ("std.aarm", include_str!("../../stdlib/aarm.ward")),
    ("std.camel", include_str!("../../stdlib/camel.ward")),
    ("std.ibac", include_str!("../../stdlib/ibac.ward")),
    ("std.rate", include_str!("../../stdlib/rate.ward")),
    ("std.skills", include_str!("../../stdlib/skills.ward")),
    ("std.agbom", include_str!("../../stdlib/agbom.ward")),
    ("std.effects", include_str!("../../stdlib/effects.ward")),
    ("std.audience", include_str!("../../stdlib/audience.ward")),
    (
        "std.compaction",
        include_str!("../../stdlib/compaction.ward"),
    ),
    ("std.defaults", include_str!("../../stdlib/defaults.ward")),
];

/// The embedded default policy (`stdlib/defaults.ward`).
pub const DEFAULT_POLICY: &str = include_str!("../../stdlib/defaults.ward");

/// One parsed file of a policy.
#[derive(Debug, Clone)]
pub struct Unit {
    pub file: FileId,
    /// `std.taint` for stdlib modules, the package name or file path otherwise.
    pub name: String,
    pub module: ast::Module,
    pub is_std: bool,
    /// The file the user asked for (warnings about unused names apply to it).
    pub is_root: bool,
    /// Directory that relative paths (`use rego "…"`, fixtures) resolve against.
    pub dir: Option<PathBuf>,
}

/// A policy's files, parsed, with the problems found while loading them.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub sources: SourceMap,
    pub units: Vec<Unit>,
    pub diagnostics: Vec<Diagnostic>,
    /// `use rego` imports: the importing file and what was loaded.
    pub rego: Vec<(FileId, crate::rego::RegoImport)>,
}

/// Reads a file as a source; a file that is not UTF-8 is reported at its first bad byte.
pub fn read_source(path: &Path) -> Result<(SourceFile, Option<Diagnostic>), std::io::Error> {
    use std::io::Read;
    // Bounded, whatever a size check before it saw: a file that grows after the check is not
    // read whole.
    let max = crate::diagnostics::MAX_SOURCE_BYTES;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{}: over the limit of {max} bytes for a policy file",
                path.display()
            ),
        ));
    }
    Ok(source_of(path, bytes))
}

/// Reads a module a policy `use`s: like [`read_source`], within
/// [`crate::diagnostics::MAX_IMPORT_BYTES`] and only from a regular file.
fn read_module(path: &Path) -> Result<(SourceFile, Option<Diagnostic>), String> {
    let bytes = crate::diagnostics::read_import(path, crate::diagnostics::MAX_IMPORT_BYTES)?;
    Ok(source_of(path, bytes))
}

fn source_of(path: &Path, bytes: Vec<u8>) -> (SourceFile, Option<Diagnostic>) {
    let name = path.display().to_string();
    match String::from_utf8(bytes) {
        Ok(text) => (SourceFile::new(name, text), None),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let diag = Diagnostic::error(
                Code::SyntaxNotUtf8,
                FileId(0),
                Span::new(at, at + 1),
                "file is not valid UTF-8",
            )
            .with_label("this byte does not start a UTF-8 character")
            .with_help("save the file as UTF-8");
            (SourceFile::new(name, text), Some(diag))
        }
    }
}

impl Loaded {
    /// Loads a policy rooted at a file on disk.
    pub fn from_path(path: &Path) -> Result<Loaded, std::io::Error> {
        let (source, bad_utf8) = read_source(path)?;
        let mut loaded = Loaded::default();
        let dir = path
            .parent()
            .map(|d| {
                if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                }
            })
            .map(Path::to_path_buf);
        let file = loaded.sources.add(source);
        if let Some(mut d) = bad_utf8 {
            d.file = file;
            loaded.diagnostics.push(d);
            return Ok(loaded);
        }
        loaded.add_unit(file, path.display().to_string(), false, true, dir);
        Ok(loaded)
    }

    /// Adds another file on disk to a loaded policy, following its `use`s (the test runner
    /// loads `foo_test.ward` beside `foo.ward` this way). Check the result again with
    /// [`crate::check::check`].
    pub fn add_path(&mut self, path: &Path) -> Result<(), std::io::Error> {
        let (source, bad_utf8) = read_source(path)?;
        let dir = path.parent().map(Path::to_path_buf);
        let file = self.sources.add(source);
        if let Some(mut d) = bad_utf8 {
            d.file = file;
            self.diagnostics.push(d);
            return Ok(());
        }
        self.add_unit(file, path.display().to_string(), false, true, dir);
        Ok(())
    }

    /// Loads a policy from text; `name` is what diagnostics call the file. Relative `use`s
    /// resolve against `dir` when given.
    pub fn from_source(name: &str, text: &str, dir: Option<PathBuf>) -> Loaded {
        let mut loaded = Loaded::default();
        let file = loaded.sources.add(SourceFile::new(name, text));
        loaded.add_unit(file, name.to_string(), false, true, dir);
        loaded
    }

    /// A policy given as text (no folder) that imports Rego: an error at each `use rego`.
    /// The decision paths call this (`guardian::Policy::from_source`, the test runner's
    /// `Suite::from_source`, and so the WebAssembly package, which has no files); plain
    /// checking of a text does not, so an editor buffer or a documentation example that
    /// names Rego files still checks.
    pub fn refuse_rego_without_folder(&mut self) {
        let mut found = Vec::new();
        for unit in self.units.iter().filter(|u| u.dir.is_none() && !u.is_std) {
            for item in &unit.module.items {
                if let ast::Item::Use(u) = item {
                    if let ast::UseKind::Rego { path } | ast::UseKind::RegoData { path } = &u.kind {
                        found.push((unit.file, path.span, path.value.clone()));
                    }
                }
            }
        }
        for (file, span, path) in found {
            self.diagnostics.push(
                Diagnostic::error(
                    Code::MissingRego,
                    file,
                    span,
                    format!(
                        "cannot import `{path}`: this policy was given as text, with no folder \
                         to read Rego files from"
                    ),
                )
                .with_label("no folder to resolve this path against")
                .with_help(
                    "Rego is read from files beside the policy: load the policy from a file (or \
                     embed it with `Policy::from_source_in`); the WebAssembly package and the \
                     playground have no files, so `use rego` is not available there",
                ),
            );
        }
    }

    fn add_unit(
        &mut self,
        file: FileId,
        name: String,
        is_std: bool,
        is_root: bool,
        dir: Option<PathBuf>,
    ) {
        let text = self.sources.get(file).text.clone();
        let (module, diags) = syntax::parse(file, &text);
        self.diagnostics.extend(diags);
        let uses: Vec<ast::Use> = module
            .items
            .iter()
            .filter_map(|i| match i {
                ast::Item::Use(u) => Some(u.clone()),
                _ => None,
            })
            .collect();
        self.units.push(Unit {
            file,
            name,
            module,
            is_std,
            is_root,
            dir: dir.clone(),
        });
        for u in uses {
            self.resolve_use(file, &u, dir.as_deref());
        }
    }

    fn loaded_names(&self) -> HashSet<String> {
        self.units.iter().map(|u| u.name.clone()).collect()
    }

    fn resolve_use(&mut self, from: FileId, u: &ast::Use, dir: Option<&Path>) {
        match &u.kind {
            ast::UseKind::Module { path } => {
                let name: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
                let name = name.join(".");
                if self.loaded_names().contains(&name) {
                    return;
                }
                if name == "std" || name.starts_with("std.") {
                    match STDLIB.iter().find(|(n, _)| *n == name) {
                        Some((n, text)) => {
                            let file = self.sources.add(SourceFile::new(format!("<{n}>"), *text));
                            self.add_unit(file, name, true, false, None);
                        }
                        None => {
                            let known = STDLIB.iter().map(|(n, _)| *n);
                            let mut d = Diagnostic::error(
                                Code::UnknownModule,
                                from,
                                u.span,
                                format!("there is no stdlib module `{name}`"),
                            )
                            .with_label("unknown module");
                            let names: Vec<&str> = STDLIB.iter().map(|(n, _)| *n).collect();
                            d = match did_you_mean(&name, known) {
                                Some(s) => d
                                    .with_help(format!("did you mean `{s}`?"))
                                    .with_fix(path_span(path), s.to_string()),
                                None => d.with_help(format!(
                                    "the stdlib modules are {}",
                                    names.join(", ")
                                )),
                            };
                            self.diagnostics.push(d);
                        }
                    }
                    return;
                }
                let rel: PathBuf = path.iter().map(|i| i.name.as_str()).collect();
                let rel = rel.with_extension("ward");
                let candidate = dir.map(|d| d.join(&rel));
                match candidate.filter(|p| p.is_file()) {
                    Some(p) => match read_module(&p) {
                        Ok((source, bad)) => {
                            let file = self.sources.add(source);
                            if let Some(mut d) = bad {
                                d.file = file;
                                self.diagnostics.push(d);
                                return;
                            }
                            let dir = p.parent().map(Path::to_path_buf);
                            self.add_unit(file, name, false, false, dir);
                        }
                        Err(e) => self.diagnostics.push(
                            Diagnostic::error(
                                Code::UnreadableModule,
                                from,
                                u.span,
                                format!("cannot read module `{name}`: {e}"),
                            )
                            .with_label("used here"),
                        ),
                    },
                    None => self.diagnostics.push(
                        Diagnostic::error(
                            Code::UnknownModule,
                            from,
                            u.span,
                            format!("cannot find module `{name}`"),
                        )
                        .with_label("not found")
                        .with_help(format!(
                            "a module `{name}` is the file `{}` next to this policy; stdlib modules start with `std.`",
                            rel.display()
                        )),
                    ),
                }
            }
            ast::UseKind::Rego { path } | ast::UseKind::RegoData { path } => {
                let Some(dir) = dir else { return };
                let full = dir.join(&path.value);
                if !full.exists() {
                    self.diagnostics.push(
                        Diagnostic::error(
                            Code::MissingRego,
                            from,
                            path.span,
                            format!("cannot find `{}`", path.value),
                        )
                        .with_label("no such file or folder")
                        .with_help(format!(
                            "paths are relative to the policy's folder ({})",
                            shown_dir(dir)
                        )),
                    );
                    return;
                }
                let Some(alias) = u.alias.as_ref() else {
                    return;
                };
                let is_data = matches!(u.kind, ast::UseKind::RegoData { .. });
                match crate::rego::load_import(&alias.name, &full, is_data) {
                    Ok(import) => {
                        self.report_missing_builtins(&import);
                        self.rego.push((from, import));
                    }
                    Err(e) => self.diagnostics.push(
                        Diagnostic::error(
                            Code::BadRego,
                            from,
                            path.span,
                            format!("cannot load `{}`: {e}", path.value),
                        )
                        .with_label("Rego that does not load")
                        .with_help(format!(
                            "a Rego import is a regular UTF-8 file (or a folder of them) of at \
                             most {} MiB that parses and declares one package per alias",
                            crate::diagnostics::MAX_IMPORT_BYTES >> 20
                        )),
                    ),
                }
            }
        }
    }
}

impl Loaded {
    /// A Rego call this build cannot run is an error at load, in the Rego file at the call.
    fn report_missing_builtins(&mut self, import: &crate::rego::RegoImport) {
        for m in &import.missing {
            let Some((path, text)) = import.files.get(m.file) else {
                continue;
            };
            let name = path.display().to_string();
            let file = match self.sources.find(&name) {
                Some(f) => f,
                None => self.sources.add(SourceFile::new(name, text.as_str())),
            };
            let (message, label) = if m.replacement {
                (
                    format!(
                        "{} replaces a function with the builtin `{}` (`with … as {}`), which \
                         Warden's Rego cannot do",
                        path.display(),
                        m.name,
                        m.name
                    ),
                    "the replacement",
                )
            } else {
                (
                    format!(
                        "{} calls `{}`, which is no builtin of Warden's Rego and no function \
                         of the package",
                        path.display(),
                        m.name
                    ),
                    "called here",
                )
            };
            self.diagnostics.push(
                Diagnostic::error(
                    Code::UnknownRegoBuiltin,
                    file,
                    Span::new(m.span.0, m.span.1),
                    message,
                )
                .with_label(label)
                .with_help(m.hint.clone()),
            );
        }
    }
}

/// A directory for messages: `.` rather than an empty path.
pub fn shown_dir(dir: &Path) -> String {
    if dir.as_os_str().is_empty() {
        ".".into()
    } else {
        dir.display().to_string()
    }
}

fn path_span(path: &[ast::Ident]) -> Span {
    match (path.first(), path.last()) {
        (Some(a), Some(b)) => a.span.to(b.span),
        _ => Span::default(),
    }
}

/// Expands files and folders into the `.ward` files to check, sorted, without duplicates:
/// folders recursively, and a `foo.ward` named directly with its `foo_test.ward` when there is
/// one (`warden check` and `warden test` load the same files: docs/testing.md).
pub fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out).map_err(|e| format!("{}: {e}", p.display()))?;
        } else if p.is_file() {
            out.push(p.clone());
            out.extend(test_sibling(p));
        } else {
            return Err(format!("{}: no such file or folder", p.display()));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// `foo_test.ward` beside `foo.ward`, if it exists (none for a file that is a test file).
fn test_sibling(p: &Path) -> Option<PathBuf> {
    let stem = p.file_stem()?.to_str()?;
    let sibling = p.with_file_name(format!("{stem}_test.ward"));
    (!stem.ends_with("_test") && sibling.is_file()).then_some(sibling)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        let name = e.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "ward") {
            out.push(p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(loaded: &Loaded) -> Vec<(&'static str, String)> {
        loaded
            .diagnostics
            .iter()
            .map(|d| (d.code.as_str(), d.message.clone()))
            .collect()
    }

    #[cfg(unix)]
    #[test]
    fn a_device_is_not_imported() {
        // Before the cap, this read /dev/zero until memory ran out.
        let text = "use rego \"dev/zero\" as z\nuse rego data \"dev/zero\" as d\n";
        let loaded = Loaded::from_source("p.ward", text, Some(PathBuf::from("/")));
        let errs = errors(&loaded);
        assert_eq!(errs.len(), 2, "{errs:?}");
        for (code, message) in errs {
            assert_eq!(code, Code::BadRego);
            assert!(
                message.contains("/dev/zero: not a regular file"),
                "{message}"
            );
        }
    }

    #[test]
    fn an_import_over_the_cap_is_refused_unread() {
        let dir = std::env::temp_dir().join(format!("warden-import-cap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = std::fs::File::create(dir.join("big.rego")).unwrap();
        big.set_len(crate::diagnostics::MAX_IMPORT_BYTES + 1)
            .unwrap();
        let module = std::fs::File::create(dir.join("huge.ward")).unwrap();
        module
            .set_len(crate::diagnostics::MAX_IMPORT_BYTES + 1)
            .unwrap();
        let text = "use rego \"big.rego\" as big\nuse huge\n";
        let loaded = Loaded::from_source("p.ward", text, Some(dir.clone()));
        let errs = errors(&loaded);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(errs[0].0, Code::BadRego);
        assert_eq!(errs[1].0, Code::UnreadableModule);
        for (_, message) in &errs {
            assert!(
                message.contains("over the import limit of 16777216 bytes (16 MiB)"),
                "{message}"
            );
        }
        assert!(errs[0].1.contains("big.rego"), "{}", errs[0].1);
        assert!(errs[1].1.contains("huge.ward"), "{}", errs[1].1);
    }
}
