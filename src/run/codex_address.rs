//! Codex pointed at the proxy on its command line, for `worldfs run --proxy -- codex`.
//!
//! Codex takes its provider's address from config.toml or `-c`, never from the environment
//! (vendor-docs/codex.md, "The model calls"), so `WORLDFS_PROXY_URL` alone reaches it only
//! through a shell. Its built-in `openai` provider is moved by `openai_base_url`: given as
//! `-c openai_base_url="PROXY/v1"` before the user's arguments, where Codex takes it for
//! `exec` and its other subcommands too. When a layer already moves it (a gateway), the
//! proxy forwards there: to that address's origin, with Codex given the proxy's address with
//! the same path, so that the path each call names is the one the gateway expects. A provider of the user's own (`model_provider` in a
//! config file, or `-c`) has an address worldfs does not know the shape of, and is left as it
//! is: the run warns, or takes it that `--listen` is the address it names.
//!
//! Codex 0.171.0's layers, later ones counting over earlier ones: `/etc/codex/config.toml`,
//! the user's `$CODEX_HOME/config.toml` (`~/.codex`), with `--profile NAME` the user's
//! `NAME.config.toml` over it (its `--help`), then the project's `.codex/config.toml` (for a
//! project it trusts; an untrusted one's is taken to count too, which errs towards a
//! warning). The legacy selector `profile = "NAME"` with `[profiles.NAME]` tables is still
//! read by it, and here.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::agent::{agent, toml_string};
use crate::claude_hook::install::Agent;

/// What `worldfs run` does about Codex's address.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum CodexAddress {
    /// Not Codex, or its command line names an address of its own.
    Untouched,
    /// The built-in `openai` provider, at `base` (its own address, or a layer's
    /// `openai_base_url`): to be moved to the proxy (`pointing`).
    Openai { base: String },
    /// The provider is one of the user's own, named where `from` says.
    OwnProvider { name: String, from: String },
}

/// Where Codex reads its configuration for a run.
#[derive(Debug)]
pub(super) struct Layers {
    pub system: PathBuf,
    /// `$CODEX_HOME`, `~/.codex` by default.
    pub home: Option<PathBuf>,
    /// The project's directory.
    pub project: PathBuf,
}

impl Layers {
    /// Codex's layers for a run in `dir`, from the environment.
    pub(super) fn of(dir: &Path) -> Layers {
        let (home, codex_home) = super::agent::homes();
        Layers {
            system: PathBuf::from("/etc/codex/config.toml"),
            home: crate::claude_hook::install::codex_dir(home.as_deref(), codex_home.as_deref()),
            project: dir.to_owned(),
        }
    }

    /// The files, the last counting most, with `profile` given by `--profile`.
    fn files(&self, profile: Option<&str>) -> Vec<PathBuf> {
        let mut files = vec![self.system.clone()];
        if let Some(h) = &self.home {
            files.push(h.join("config.toml"));
            files.extend(profile.map(|p| h.join(format!("{p}.config.toml"))));
        }
        files.push(self.project.join(".codex").join("config.toml"));
        files
    }
}

/// The `openai` provider's own address.
const OPENAI: &str = "https://api.openai.com/v1";

/// What to do for `program` with `args`, run with its configuration in `layers`.
pub(super) fn for_codex(program: &Path, args: &[OsString], layers: &Layers) -> CodexAddress {
    if agent(program) != Some(Agent::Codex) {
        return CodexAddress::Untouched;
    }
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // `-c openai_base_url=...`, `-c model_providers.NAME.base_url=...`: pointed by the user.
    if args.iter().any(|a| a.contains("base_url")) {
        return CodexAddress::Untouched;
    }
    let files = layers.files(profile_in_args(&args).as_deref());
    let provider = provider_in_args(&args)
        .map(|p| (p, "-c model_provider".to_owned()))
        .or_else(|| provider_in_config(&files));
    match provider {
        Some((name, from)) if name != "openai" => CodexAddress::OwnProvider { name, from },
        _ => CodexAddress::Openai {
            base: base_in_config(&files).unwrap_or_else(|| OPENAI.to_owned()),
        },
    }
}

/// Where the proxy forwards the calls of the `openai` provider at `base`: its origin (scheme,
/// host and port); the path stays in each call's (`pointing`). None when `base` is no URL.
pub(super) fn upstream_for(base: &str) -> Option<String> {
    let url = reqwest::Url::parse(base).ok()?;
    let origin = url.origin();
    origin.is_tuple().then(|| origin.ascii_serialization())
}

/// The arguments that move the `openai` provider at `base` to the proxy at `url`: the proxy's
/// address with `base`'s path, before the user's arguments.
pub(super) fn pointing(base: &str, url: &str) -> [OsString; 2] {
    let path = reqwest::Url::parse(base)
        .map(|u| u.path().trim_end_matches('/').to_owned())
        .unwrap_or_else(|_| "/v1".to_owned());
    [
        "-c".into(),
        format!("openai_base_url={}", toml_string(&format!("{url}{path}"))).into(),
    ]
}

/// The `openai_base_url` of the layer that counts most, if one sets it.
fn base_in_config(files: &[PathBuf]) -> Option<String> {
    files.iter().rev().find_map(|f| {
        let table: toml::Table = std::fs::read_to_string(f).ok()?.parse().ok()?;
        Some(table.get("openai_base_url")?.as_str()?.to_owned())
    })
}

/// The value of the last `model_provider=VALUE` among `-c` overrides.
fn provider_in_args(args: &[String]) -> Option<String> {
    args.iter()
        .rev()
        .find_map(|a| a.strip_prefix("model_provider="))
        .map(|v| v.trim().trim_matches(['"', '\'']).to_owned())
}

/// The profile named by `--profile NAME`, `--profile=NAME` or `-p NAME`.
fn profile_in_args(args: &[String]) -> Option<String> {
    let mut it = args.iter();
    let mut found = None;
    while let Some(a) = it.next() {
        if a == "--profile" || a == "-p" {
            found = it.next().cloned();
        } else if let Some(v) = a.strip_prefix("--profile=") {
            found = Some(v.to_owned());
        }
    }
    found
}

/// The provider `files` choose (the last file naming one wins), with the file that named it:
/// the legacy profile's `model_provider` when a file selects one (`profile = "NAME"`) and it
/// sets one, else the top-level `model_provider`.
fn provider_in_config(files: &[PathBuf]) -> Option<(String, String)> {
    let tables: Vec<(&PathBuf, toml::Table)> = files
        .iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).ok()?;
            Some((f, text.parse::<toml::Table>().ok()?))
        })
        .collect();
    let profile = tables
        .iter()
        .rev()
        .find_map(|(_, t)| t.get("profile")?.as_str().map(str::to_owned));
    let in_profile = profile.and_then(|p| {
        tables.iter().rev().find_map(|(f, t)| {
            let name = t
                .get("profiles")?
                .get(&p)?
                .get("model_provider")?
                .as_str()?;
            Some((name.to_owned(), format!("{}, profile {p}", f.display())))
        })
    });
    in_profile.or_else(|| {
        tables.iter().rev().find_map(|(f, t)| {
            let name = t.get("model_provider")?.as_str()?;
            Some((name.to_owned(), f.display().to_string()))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    fn given() -> CodexAddress {
        CodexAddress::Openai {
            base: OPENAI.into(),
        }
    }

    /// Layers in a temporary directory: `system.toml`, `home/`, `project/`.
    fn layers(dir: &Path) -> Layers {
        std::fs::create_dir_all(dir.join("home")).unwrap();
        std::fs::create_dir_all(dir.join("project/.codex")).unwrap();
        Layers {
            system: dir.join("system.toml"),
            home: Some(dir.join("home")),
            project: dir.join("project"),
        }
    }

    fn own(name: &str, from: &Path) -> CodexAddress {
        CodexAddress::OwnProvider {
            name: name.into(),
            from: from.display().to_string(),
        }
    }

    #[test]
    fn codex_with_the_openai_provider_is_given_the_proxys_address() {
        let dir = tempfile::tempdir().unwrap();
        let l = layers(dir.path());
        let codex = Path::new("/usr/local/bin/codex");
        assert_eq!(for_codex(codex, &args(&["exec", "fix it"]), &l), given());
        let openai = args(&["-c", "model_provider=openai", "exec", "x"]);
        assert_eq!(for_codex(codex, &openai, &l), given());
        let pointed = args(&["-c", "openai_base_url=\"http://elsewhere/v1\""]);
        assert_eq!(for_codex(codex, &pointed, &l), CodexAddress::Untouched);
        let own_arg = args(&["-c", "model_provider=\"azure\""]);
        assert_eq!(
            for_codex(codex, &own_arg, &l),
            CodexAddress::OwnProvider {
                name: "azure".into(),
                from: "-c model_provider".into()
            }
        );
        assert_eq!(
            for_codex(Path::new("claude"), &[], &l),
            CodexAddress::Untouched
        );
    }

    #[test]
    fn the_provider_comes_from_the_layer_that_counts_most() {
        let dir = tempfile::tempdir().unwrap();
        let l = layers(dir.path());
        let user = dir.path().join("home/config.toml");
        let project = dir.path().join("project/.codex/config.toml");
        let codex = Path::new("codex");
        std::fs::write(&l.system, "model_provider = \"corp\"\n").unwrap();
        assert_eq!(
            for_codex(codex, &args(&["exec"]), &l),
            own("corp", &l.system)
        );
        std::fs::write(&user, "model_provider = \"mine\"\n").unwrap();
        assert_eq!(for_codex(codex, &args(&["exec"]), &l), own("mine", &user));
        // `--profile NAME`: the user's NAME.config.toml over config.toml.
        let work = dir.path().join("home/work.config.toml");
        std::fs::write(&work, "model_provider = \"openai\"\n").unwrap();
        assert_eq!(
            for_codex(codex, &args(&["-p", "work", "exec"]), &l),
            given()
        );
        assert_eq!(
            for_codex(codex, &args(&["--profile=lab"]), &l),
            own("mine", &user)
        );
        // The project's file counts over the user's.
        std::fs::write(&project, "model_provider = \"openai\"\n").unwrap();
        assert_eq!(for_codex(codex, &args(&[]), &l), given());
        // A legacy profile selected in a file, and its table.
        std::fs::write(
            &project,
            "profile = \"old\"\n[profiles.old]\nmodel_provider = \"legacy\"\n",
        )
        .unwrap();
        assert_eq!(
            for_codex(codex, &args(&[]), &l),
            CodexAddress::OwnProvider {
                name: "legacy".into(),
                from: format!("{}, profile old", project.display())
            }
        );
        // A file that is not TOML is passed over.
        std::fs::write(&project, "not [toml").unwrap();
        assert_eq!(for_codex(codex, &args(&[]), &l), own("mine", &user));
    }

    #[test]
    fn a_gateway_in_the_config_is_the_upstream_and_its_path_stays() {
        let dir = tempfile::tempdir().unwrap();
        let l = layers(dir.path());
        std::fs::write(
            dir.path().join("home/config.toml"),
            "openai_base_url = \"https://gw.example.com:8443/openai/v1/\"\n",
        )
        .unwrap();
        let CodexAddress::Openai { base } = for_codex(Path::new("codex"), &[], &l) else {
            panic!("not the openai provider");
        };
        assert_eq!(
            upstream_for(&base).as_deref(),
            Some("https://gw.example.com:8443")
        );
        assert_eq!(
            pointing(&base, "http://127.0.0.1:41234"),
            [
                OsString::from("-c"),
                OsString::from("openai_base_url=\"http://127.0.0.1:41234/openai/v1\"")
            ]
        );
        assert_eq!(
            upstream_for(OPENAI).as_deref(),
            Some("https://api.openai.com")
        );
        assert_eq!(
            pointing(OPENAI, "http://127.0.0.1:1")[1],
            "openai_base_url=\"http://127.0.0.1:1/v1\""
        );
        assert_eq!(upstream_for("not a url"), None);
    }
}
