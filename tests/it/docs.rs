//! The reference pages checked against what they describe, so they cannot drift:
//! `docs/configuration.md` against `a2a-gateway --help` (every flag, its variable, default
//! and place in the file) and the config loader (every key of its tables, as the loader's
//! own "expected one of" lists them), the README's config files against `check-config`,
//! and `docs/errors.md` against the error table, the
//! gateway's fault reasons, the limit table and the transport fault table. A flag, key or
//! row added, renamed or removed without its page fails here, naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use a2a_gateway::protocol::error::{ErrorKind, Profile};
use tonic::Code;

use crate::harness::process::{TempFile, BIN};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// One row of a Markdown table: the heading it stands under and its cells.
struct Row {
    heading: String,
    cells: Vec<String>,
}

/// The rows of every table of a page (header and separator rows left out).
fn rows(page: &str) -> Vec<Row> {
    let text = std::fs::read_to_string(repo().join(page)).unwrap();
    let mut heading = String::new();
    let mut rows = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with('#') {
            heading = line.trim_start_matches('#').trim().to_owned();
        }
        let is_row = line.starts_with('|') && !line.starts_with("|---");
        let is_header = lines
            .get(i + 1)
            .is_some_and(|next| next.starts_with("|---"));
        if is_row && !is_header {
            // `\|` is a pipe inside a cell.
            let cells = line.replace("\\|", "\u{0}");
            let cells = cells.trim().trim_matches('|').split('|');
            let cells = cells.map(|c| c.trim().replace('\u{0}', "|")).collect();
            rows.push(Row {
                heading: heading.clone(),
                cells,
            });
        }
    }
    rows
}

/// A cell that is one code span, without its backticks.
fn code(cell: &str) -> Option<&str> {
    cell.strip_prefix('`')?.strip_suffix('`')
}

/// A cell's value: its code span, or `None` for `—`.
fn value(cell: &str) -> Option<String> {
    (cell != "—").then(|| code(cell).unwrap_or(cell).to_owned())
}

/// A flag as `--help` shows it.
#[derive(Debug, PartialEq)]
struct Flag {
    section: String,
    env: Option<String>,
    default: Option<String>,
}

/// Every flag of `a2a-gateway --help`, by long name.
fn help_flags() -> BTreeMap<String, Flag> {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let mut flags = BTreeMap::new();
    let (mut section, mut current) = (String::new(), None::<String>);
    for line in help.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line.trim_end_matches(':').to_owned();
            continue;
        }
        let trimmed = line.trim_start();
        let flag = trimmed.strip_prefix("-h, ").unwrap_or(trimmed);
        let flag = flag.strip_prefix("-V, ").unwrap_or(flag);
        // Flags stand at most six columns in; their descriptions further.
        let is_flag = line.len() - trimmed.len() <= 6;
        if let Some(flag) = flag.strip_prefix("--").filter(|_| is_flag) {
            let name = flag.split([' ', '=']).next().unwrap().to_owned();
            let entry = Flag {
                section: section.clone(),
                env: None,
                default: None,
            };
            flags.insert(name.clone(), entry);
            current = Some(name);
        } else if let Some(flag) = current.as_ref().and_then(|name| flags.get_mut(name)) {
            if let Some(env) = trimmed.strip_prefix("[env: ") {
                let env = env.trim_end_matches(']').trim_end_matches('=');
                flag.env = Some(env.split('=').next().unwrap().to_owned());
            } else if let Some(default) = trimmed.strip_prefix("[default: ") {
                flag.default = Some(default.strip_suffix(']').unwrap().to_owned());
            }
        }
    }
    flags
}

/// The `--help` section a page's flag table heading stands for.
fn section_of(heading: &str) -> &'static str {
    match heading {
        "Command line only" => "Options",
        "Process-wide settings" => "Process-wide settings",
        "Route settings" => "Route settings",
        other => panic!("configuration.md: a flag table under {other:?}"),
    }
}

#[test]
fn every_flag_is_documented_with_its_variable_default_and_place() {
    let help = help_flags();
    assert!(help.len() > 80, "--help parsed: {help:?}");
    let mut documented = BTreeMap::new();
    for row in rows("docs/configuration.md") {
        let Some(name) = code(&row.cells[0]).and_then(|c| c.strip_prefix("--")) else {
            continue;
        };
        let flag = Flag {
            section: section_of(&row.heading).to_owned(),
            env: value(&row.cells[1]),
            default: value(&row.cells[2]),
        };
        let twice = documented.insert(name.to_owned(), flag);
        assert!(twice.is_none(), "configuration.md: --{name} has two rows");
    }
    let mut wrong = Vec::new();
    for (name, flag) in &help {
        match documented.get(name) {
            None => wrong.push(format!("--{name} is in --help, not in the page")),
            Some(doc) if doc != flag => {
                wrong.push(format!("--{name}: the page says {doc:?}, --help {flag:?}"))
            }
            Some(_) => {}
        }
    }
    for name in documented.keys().filter(|name| !help.contains_key(*name)) {
        wrong.push(format!("--{name} is in the page, not in --help"));
    }
    assert!(
        wrong.is_empty(),
        "docs/configuration.md:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_variable_the_page_or_the_tracer_names_is_real_and_documented() {
    let page = std::fs::read_to_string(repo().join("docs/configuration.md")).unwrap();
    let help: BTreeSet<String> = help_flags().into_values().filter_map(|f| f.env).collect();
    // The names that start where `marker` ends less `prefix` (a quote before a literal).
    let named = |text: &str, marker: &str, prefix: &str| -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for (at, _) in text.match_indices(marker) {
            let start = at + marker.len() - prefix.len();
            let name: String = text[start..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            // The bare prefix (`A2A_GATEWAY_…` in prose) names no variable.
            if name.len() > prefix.len() {
                names.insert(name);
            }
        }
        names
    };
    let unknown: Vec<_> = named(&page, "A2A_GATEWAY_", "A2A_GATEWAY_")
        .into_iter()
        .filter(|name| !help.contains(name))
        .collect();
    assert!(
        unknown.is_empty(),
        "configuration.md names variables --help does not know: {unknown:?}"
    );
    // The OpenTelemetry variables the gateway reads itself.
    let tracer = std::fs::read_to_string(repo().join("src/telemetry/trace.rs")).unwrap();
    let read = named(&tracer, "\"OTEL_", "OTEL_");
    assert!(read.contains("OTEL_SERVICE_NAME"), "{read:?}");
    let missing: Vec<_> = read
        .into_iter()
        .filter(|name| !page.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "src/telemetry/trace.rs reads variables configuration.md does not name: {missing:?}"
    );
}

/// What `check-config` says of `text`: its error line, or `None` when the file is good.
fn check_config(text: &str) -> Option<String> {
    let file = TempFile::new("toml", text);
    let out = Command::new(BIN)
        .args(["check-config", file.path()])
        .env_clear()
        .output()
        .unwrap();
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The keys the loader accepts in a table, as its refusal of an unknown key lists them.
fn loader_keys(table: &str) -> BTreeSet<String> {
    let file = format!("backend = \"http://127.0.0.1:1\"\n{table}\nno-such-key = 1\n");
    let error = check_config(&file).expect("an unknown key is refused");
    let (_, expected) = error
        .split_once(", expected ")
        .unwrap_or_else(|| panic!("{table}: {error}"));
    expected
        .trim()
        .trim_start_matches("one of ")
        .split(", ")
        .map(|key| key.trim_matches('`').to_owned())
        .collect()
}

#[test]
fn every_key_of_the_file_tables_is_documented_and_accepted() {
    // The page's table keys by their heading (`[card]`, `[[auth.jwt]]`, …).
    let mut documented: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in rows("docs/configuration.md") {
        let Some(table) = code(&row.heading).filter(|h| h.starts_with('[')) else {
            continue;
        };
        let key = code(&row.cells[0]).expect("a key in backticks");
        documented
            .entry(table.to_owned())
            .or_default()
            .insert(key.to_owned());
    }
    let tables: Vec<String> = documented.keys().cloned().collect();
    let name = |table: &str| table.trim_matches(['[', ']']).to_owned();
    let mut wrong = Vec::new();
    for table in &tables {
        if table == "[[route]]" {
            continue;
        }
        let mut keys = documented[table].clone();
        // A table's sub-tables are keys of it too (`[auth.jwt]` is `jwt` of `[auth]`).
        let prefix = format!("{}.", name(table));
        for sub in &tables {
            if let Some(key) = name(sub).strip_prefix(&prefix) {
                keys.insert(key.to_owned());
            }
        }
        let loader = loader_keys(table);
        if keys != loader {
            wrong.push(format!(
                "{table}: the page has {keys:?}, the loader {loader:?}"
            ));
        }
    }
    // A route's own keys: each is known to the loader (a wrong value, not an unknown key).
    for key in &documented["[[route]]"] {
        let error = check_config(&format!("[[route]]\n{key} = []\n")).unwrap();
        if error.contains("unknown key") {
            wrong.push(format!("[[route]] {key}: {error}"));
        }
    }
    let refused = check_config("[[route]]\nno-such-key = []\n").unwrap();
    assert!(refused.contains("unknown key"), "{refused}");
    assert!(
        wrong.is_empty(),
        "docs/configuration.md:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_readme_config_files_pass_check_config() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let blocks: Vec<&str> = readme
        .split("```toml\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap())
        .collect();
    assert!(!blocks.is_empty(), "README.md shows no config file");
    for block in blocks {
        if let Some(error) = check_config(block) {
            panic!("README.md's config file does not load: {error}\n{block}");
        }
    }
}

/// `text` without whitespace, so a table reads the same however rustfmt wraps it.
fn squeezed(path: &str) -> String {
    let text = std::fs::read_to_string(repo().join(path)).unwrap();
    text.split_whitespace().collect()
}

/// Calls `parse` on the text after each occurrence of `start`, keeping what it finds.
fn after<T>(text: &str, start: &str, parse: impl Fn(&str) -> Option<T>) -> Vec<T> {
    text.match_indices(start)
        .filter_map(|(at, _)| parse(&text[at + start.len()..]))
        .collect()
}

/// A leading identifier and the rest.
fn ident(text: &str) -> Option<(&str, &str)> {
    let end = text
        .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .unwrap_or(text.len());
    (end > 0).then(|| text.split_at(end))
}

/// A leading string literal (without escapes) and the rest.
fn quoted(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('"')?;
    let end = text.find('"')?;
    Some((&text[..end], &text[end + 1..]))
}

/// Every reason of domain `a2a-gateway` the source gives: the `GatewayFault` rows and the
/// `ErrorInfo` literals of that domain (the authentication and authorization refusals).
fn gateway_reasons() -> BTreeSet<String> {
    let mut reasons: BTreeSet<String> = after(
        &squeezed("src/protocol/error.rs"),
        "GatewayFault::",
        |rest| {
            let (_, rest) = ident(rest)?;
            let (reason, _) = quoted(rest.strip_prefix("=>")?)?;
            Some(reason.to_owned())
        },
    )
    .into_iter()
    .collect();
    let mut dirs = vec![repo().join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path: PathBuf = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(repo()).unwrap().to_str().unwrap();
                reasons.extend(after(&squeezed(relative), "\"reason\":", |rest| {
                    let (reason, rest) = quoted(rest)?;
                    let domain = rest.strip_prefix(",\"domain\":")?;
                    let ours = domain.starts_with("GATEWAY_DOMAIN")
                        || domain.starts_with("crate::protocol::error::GATEWAY_DOMAIN");
                    ours.then(|| reason.to_owned())
                }));
            }
        }
    }
    reasons
}

/// The rows of `page` under `heading`.
fn table(page: &str, heading: &str) -> Vec<Vec<String>> {
    let rows: Vec<_> = rows(page)
        .into_iter()
        .filter(|row| row.heading == heading)
        .map(|row| row.cells)
        .collect();
    assert!(!rows.is_empty(), "{page}: no table under {heading:?}");
    rows
}

#[test]
fn every_gateway_reason_is_documented_and_every_documented_one_exists() {
    let source = gateway_reasons();
    assert!(source.contains("BACKEND_UNAVAILABLE") && source.contains("UNAUTHENTICATED"));
    let page: BTreeSet<String> = table("docs/errors.md", "Gateway faults and refusals")
        .iter()
        .map(|cells| code(&cells[0]).unwrap().to_owned())
        .collect();
    assert_eq!(
        page, source,
        "docs/errors.md's gateway reasons vs the source's"
    );
}

#[test]
fn the_a2a_error_table_is_documented_row_by_row() {
    let grpc_name = |code: Code| {
        // `FailedPrecondition` → `FAILED_PRECONDITION`, as gRPC names its codes.
        let mut name = String::new();
        for (i, c) in format!("{code:?}").chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                name.push('_');
            }
            name.push(c.to_ascii_uppercase());
        }
        format!("`{name}`")
    };
    // One value when both profiles agree, else `1.0.0's / 1.0.1's`.
    let both = |[old, new]: [String; 2]| {
        if old == new {
            new
        } else {
            format!("{old} / {new}")
        }
    };
    let want: Vec<Vec<String>> = ErrorKind::ALL
        .iter()
        .map(|&kind| {
            let code = format!("`{}`", kind.code());
            let reason = kind.reason().map_or("—".to_owned(), |r| format!("`{r}`"));
            let grpc = both(Profile::ALL.map(|p| grpc_name(kind.grpc(p))));
            let http = both(Profile::ALL.map(|p| kind.http(p).to_string()));
            let read = match (kind.read_grpc(), kind.read_http()) {
                (None, None) => "—".to_owned(),
                (grpc, http) => format!(
                    "{} / {}",
                    grpc.map_or("—".to_owned(), grpc_name),
                    http.map_or("—".to_owned(), |s| s.to_string())
                ),
            };
            vec![code, format!("{kind:?}"), reason, grpc, http, read]
        })
        .collect();
    assert_eq!(table("docs/errors.md", "Agent errors"), want);
}

#[test]
fn the_errors_the_gateway_raises_are_rows_of_the_error_table() {
    let rows = table("docs/errors.md", "Errors the gateway raises");
    for cells in rows {
        let code: i32 = code(&cells[0]).unwrap().parse().unwrap();
        let kind = ErrorKind::ALL.iter().find(|k| k.code() == code);
        let kind = kind.unwrap_or_else(|| panic!("docs/errors.md: {code} is no error code"));
        let reason = kind.reason().map_or("—".to_owned(), |r| format!("`{r}`"));
        assert_eq!(cells[1], reason, "docs/errors.md: the reason of {code}");
    }
}

#[test]
fn every_limit_is_documented_with_its_reason_and_status() {
    let status = |name: &str| match name {
        "BUSY" => "503",
        "RATE" => "429",
        "StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE" => "431",
        other => panic!("src/front/limits.rs: a status {other:?} this test does not know"),
    };
    let source = after(&squeezed("src/front/limits.rs"), "Limit::", |rest| {
        let (_, rest) = ident(rest)?;
        let (name, rest) = quoted(rest.strip_prefix("=>(")?)?;
        let (fault, rest) = ident(rest.strip_prefix(',')?)?;
        let end = rest.strip_prefix(',')?.find(')')?;
        // rustfmt may leave a trailing comma where it wraps the row.
        let code = rest[1..=end].trim_end_matches(',');
        let reason = format!("GatewayFault::{fault}");
        Some((name.to_owned(), reason, status(code).to_owned()))
    });
    assert!(source.len() > 10, "{source:?}");
    // The fault's reason, as the error table spells it.
    let reasons = squeezed("src/protocol/error.rs");
    let reason = |fault: &str| {
        let (_, rest) = reasons.split_once(&format!("{fault}=>"))?;
        Some(format!("`{}`", quoted(rest)?.0))
    };
    let want: Vec<Vec<String>> = source
        .iter()
        .map(|(name, fault, status)| {
            let reason = reason(fault).unwrap_or_else(|| panic!("{fault} has no reason"));
            vec![format!("`{name}`"), reason, status.clone()]
        })
        .collect();
    assert_eq!(table("docs/errors.md", "Limits"), want);
}

#[test]
fn every_transport_fault_is_documented_with_its_reason() {
    let faults = squeezed("src/backend/fault.rs");
    let source = after(&faults, "Fault::", |rest| {
        let (_, rest) = ident(rest)?;
        let rest = rest.strip_prefix("(why)=>(GatewayFault::")?;
        let (fault, rest) = ident(rest)?;
        let (prefix, rest) = quoted(rest.strip_prefix(',')?)?;
        rest.starts_with(",why")
            .then(|| (prefix.to_owned(), fault.to_owned()))
    });
    assert!(source.len() > 5, "{source:?}");
    let reasons = squeezed("src/protocol/error.rs");
    let page: Vec<(String, String)> = table("docs/errors.md", "Transport faults")
        .iter()
        .map(|cells| {
            // Compared without whitespace, as the source was read.
            let prefix = code(&cells[0]).unwrap().trim_end_matches('…');
            let prefix: String = prefix.split_whitespace().collect();
            (prefix, code(&cells[1]).unwrap().to_owned())
        })
        .collect();
    let want: Vec<(String, String)> = source
        .into_iter()
        .map(|(prefix, fault)| {
            let (_, rest) = reasons
                .split_once(&format!("GatewayFault::{fault}=>"))
                .unwrap();
            (prefix, quoted(rest).unwrap().0.to_owned())
        })
        .collect();
    assert_eq!(
        page, want,
        "docs/errors.md's transport faults vs src/backend/fault.rs"
    );
}
