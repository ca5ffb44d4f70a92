//! What a packager needs from the binary: the commit in `--version`, shell completions and a
//! manual page generated from the same command definitions the parser uses.

mod common;

fn warden(args: &[&str]) -> (i32, String, String) {
    common::warden(args, b"")
}

#[test]
fn the_version_names_the_commit() {
    let (code, out, _) = warden(&["--version"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("warden 0."), "{out}");
    assert!(out.contains("(commit "), "{out}");
}

#[test]
fn completions_cover_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = warden(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        for sub in ["check", "replay", "serve", "diff", "efficacy"] {
            assert!(out.contains(sub), "{shell} completions lack {sub}");
        }
    }
    let (code, _, err) = warden(&["completions", "tcsh"]);
    assert_eq!(code, 2, "an unknown shell is a usage error: {err}");
}

#[test]
fn the_manual_page_is_roff_with_the_commands() {
    let (code, out, _) = warden(&["manpage"]);
    assert_eq!(code, 0);
    assert!(
        out.contains(".TH warden 1"),
        "{}",
        &out[..out.len().min(300)]
    );
    assert!(out.contains("serve"), "the manual page lists the commands");
}
