//! The shape of the library, checked: the planes are layered (a plane
//! imports only planes below it, and the domain `model` imports none), no
//! production file is over 800 lines and no production function over 100.
//! `docs/architecture.md` draws the same layers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The library's top-level modules by layer: a module may use only modules
/// on a lower layer (and itself).
const LAYERS: &[(&str, u32)] = &[
    ("model", 0),
    ("store", 1),
    ("sandbox", 1),
    ("schedule", 2),
    ("effects", 2),
    ("registry", 3),
    ("lease", 3),
    ("observe", 4),
    ("api", 4),
    ("node", 5),
];

/// Macros exported at the crate root, by the module that defines them.
const ROOT_MACROS: &[(&str, &str)] = &[
    ("trigger_state", "model"),
    ("effect_state", "model"),
    ("effect_states", "model"),
    ("trigger_origin", "model"),
    ("attempt_outcome", "model"),
];

const MAX_FILE_LINES: usize = 800;
const MAX_FN_LINES: usize = 100;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The library's files (not the binary's), with the top-level module each
/// belongs to.
fn library_files() -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files
        .into_iter()
        .filter_map(|path| {
            let rel = path.strip_prefix(src()).unwrap();
            let first = rel.components().next()?.as_os_str().to_str()?.to_string();
            let module = first.trim_end_matches(".rs").to_string();
            (module != "bin" && module != "lib" && module != "main").then_some((module, path))
        })
        .collect()
}

/// The text of a file without its `#[cfg(test)]` modules, or `None` for a
/// file that is test code: under a `tests/` folder, or declared
/// `#[cfg(test)] mod name;` by its parent.
fn production_text(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let rel = path.strip_prefix(src()).unwrap();
    if rel.components().any(|c| c.as_os_str() == "tests") || test_only_files().contains(path) {
        return None;
    }
    Some(without_test_modules(&text))
}

/// Every file a parent declares `#[cfg(test)] mod name;`.
fn test_only_files() -> &'static std::collections::BTreeSet<PathBuf> {
    static FILES: std::sync::OnceLock<std::collections::BTreeSet<PathBuf>> =
        std::sync::OnceLock::new();
    FILES.get_or_init(|| {
        let mut files = Vec::new();
        rust_files(&src(), &mut files);
        let mut test_only = std::collections::BTreeSet::new();
        for parent in files {
            let text = std::fs::read_to_string(&parent).unwrap();
            for name in test_module_declarations(&text) {
                let stem = parent.file_stem().unwrap().to_str().unwrap();
                let dir = if matches!(stem, "lib" | "main" | "mod") {
                    parent.parent().unwrap().to_path_buf()
                } else {
                    parent.with_extension("")
                };
                test_only.insert(dir.join(format!("{name}.rs")));
            }
        }
        test_only
    })
}

/// The names of the modules `text` declares `#[cfg(test)] mod name;`.
fn test_module_declarations(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter(|w| w[0] == "#[cfg(test)]")
        .filter_map(|w| w[1].strip_prefix("mod ")?.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

/// `text` without its inline `#[cfg(test)] mod … { … }` blocks (a test
/// module declared as `mod tests;` lives in a file of its own, left out
/// above).
fn without_test_modules(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]\nmod ") {
        out.push_str(&rest[..at]);
        let module = &rest[at..];
        let line_end = module.find('\n').map_or(module.len(), |i| i + 1);
        let head_end = module[line_end..]
            .find('\n')
            .map_or(module.len(), |i| line_end + i);
        if !module[..head_end].trim_end().ends_with('{') {
            // A declaration (`mod tests;`): keep going after it.
            out.push_str(&module[..head_end]);
            rest = &module[head_end..];
            continue;
        }
        let mut depth = 0i32;
        let mut end = module.len();
        for (i, c) in module.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &module[end..];
    }
    out.push_str(rest);
    out
}

/// The top-level modules a file refers to through `crate::`.
fn crate_refs(text: &str) -> Vec<String> {
    let mut refs = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if let Some((_, owner)) = ROOT_MACROS.iter().find(|(m, _)| *m == name) {
            refs.push(owner.to_string());
        } else if name == "Store" {
            // The store's type, re-exported at the root, is the store plane.
            refs.push("store".to_string());
        } else if !name.is_empty() {
            refs.push(name);
        }
        rest = after;
    }
    refs
}

#[test]
fn no_plane_imports_a_plane_above_it_and_the_model_imports_none() {
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut upward = Vec::new();
    for (module, path) in library_files() {
        let Some(text) = production_text(&path) else {
            continue;
        };
        let own = *layer
            .get(module.as_str())
            .unwrap_or_else(|| panic!("{module} has no layer in LAYERS"));
        for used in crate_refs(&text) {
            if used == module {
                continue;
            }
            let theirs = *layer.get(used.as_str()).unwrap_or_else(|| {
                panic!("{} uses crate::{used}, which has no layer", path.display())
            });
            if theirs >= own {
                upward.push(format!(
                    "{} ({module}, layer {own}) uses {used} (layer {theirs})",
                    path.display()
                ));
            }
        }
    }
    upward.sort();
    upward.dedup();
    assert!(
        upward.is_empty(),
        "imports that do not go down:\n{}",
        upward.join("\n")
    );
}

/// (name, first line, lines) of every function in `text`.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let Some(after) = ["fn ", "pub fn ", "async fn ", "pub async fn "]
            .iter()
            .chain(
                [
                    "pub(crate) fn ",
                    "pub(super) fn ",
                    "pub(crate) async fn ",
                    "pub(super) async fn ",
                ]
                .iter(),
            )
            .chain(
                [
                    "pub(in crate::store) fn ",
                    "pub(in crate::store) async fn ",
                    "const fn ",
                    "pub const fn ",
                ]
                .iter(),
            )
            .find_map(|p| trimmed.strip_prefix(p))
        else {
            continue;
        };
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // Find the body's opening brace (a declaration ending in `;` has none).
        let mut depth = 0i32;
        let mut opened = false;
        let mut end = None;
        'scan: for (j, body_line) in lines.iter().enumerate().skip(i) {
            for c in body_line.chars() {
                match c {
                    ';' if !opened && depth == 0 => break 'scan,
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => {
                        depth -= 1;
                        if opened && depth == 0 {
                            end = Some(j);
                            break 'scan;
                        }
                    }
                    _ => {}
                }
            }
        }
        if let Some(end) = end {
            found.push((name, i + 1, end - i + 1));
        }
    }
    found
}

#[test]
fn no_production_file_is_over_800_lines_and_no_function_over_100() {
    let mut problems = Vec::new();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    for path in files {
        let Some(text) = production_text(&path) else {
            continue;
        };
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            problems.push(format!("{}: {lines} lines", path.display()));
        }
        for (name, at, length) in functions(&text) {
            if length > MAX_FN_LINES {
                problems.push(format!(
                    "{}:{at}: fn {name} is {length} lines",
                    path.display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "too long:\n{}", problems.join("\n"));
}

#[test]
fn a_file_is_left_out_only_when_its_parent_declares_it_test_code() {
    assert_eq!(
        test_module_declarations("mod a;\n#[cfg(test)]\nmod guards;\n#[cfg(test)]\nmod tests {\n}"),
        ["guards"]
    );
    let guards = src().join("store/guards.rs");
    assert!(test_only_files().contains(&guards), "{guards:?}");
    assert!(
        production_text(&src().join("store/fence.rs")).is_some(),
        "a production file whose name ends like a test file's is read"
    );
    assert_eq!(crate_refs("use crate::Store;"), ["store"]);
}

/// Crates that belong to one room of the house: (crate path, the folders
/// and files of `host/src` that may use it).
const ROOMS: &[(&str, &[&str])] = &[
    ("axum", &["api", "api.rs", "observe"]),
    ("rusqlite", &["store", "store.rs"]),
    ("sqlx::postgres", &["store", "store.rs"]),
    ("PgPool", &["store", "store.rs"]),
    ("PgListener", &["store", "store.rs"]),
];

#[test]
fn each_room_s_crates_stay_in_their_room() {
    let mut strays = Vec::new();
    for (_, path) in library_files() {
        let Some(text) = production_text(&path) else {
            continue;
        };
        let rel = path.strip_prefix(src()).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap();
        for (krate, rooms) in ROOMS {
            if text.contains(krate) && !rooms.contains(&first) {
                strays.push(format!(
                    "{} uses {krate} (its room: {rooms:?})",
                    rel.display()
                ));
            }
        }
    }
    assert!(
        strays.is_empty(),
        "out of their rooms:\n{}",
        strays.join("\n")
    );
}

#[test]
fn only_inline_test_modules_are_left_out() {
    let text = "fn a() {}\n#[cfg(test)]\nmod tests;\nfn b() {}\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\nfn c() {}\n";
    let kept = without_test_modules(text);
    assert!(kept.contains("fn b()") && kept.contains("fn c()"), "{kept}");
    assert!(!kept.contains("fn t()"), "{kept}");
}

#[test]
fn the_function_reader_measures_bodies() {
    let text = "fn a() {\n    let x = \"{}\";\n}\n\npub async fn b(\n    y: u8,\n) -> u8 {\n    y\n}\nfn c();\n";
    assert_eq!(
        functions(text),
        vec![("a".to_string(), 1, 3), ("b".to_string(), 5, 5)]
    );
}

/// Where `text` names a work item or a session ("issue 16", "Stop 36"):
/// a reason must stand alone, so the code and the map never point at the
/// story of how they were built. Each hit as `line: text`.
fn story_references(text: &str) -> Vec<String> {
    let mut hits = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let lower = line.to_lowercase();
        for word in ["issue ", "stop "] {
            let mut from = 0;
            while let Some(at) = lower[from..].find(word) {
                let after = &lower[from + at + word.len()..];
                let before_ok =
                    from + at == 0 || !lower.as_bytes()[from + at - 1].is_ascii_alphanumeric();
                if before_ok && after.starts_with(|c: char| c.is_ascii_digit()) {
                    hits.push(format!("{}: {}", n + 1, line.trim()));
                }
                from += at + word.len();
            }
        }
    }
    hits
}

/// Lines of `text` holding a calendar date (`2026-12-04`): a dated
/// measurement or story, which belongs in `docs/performance.md`.
fn dated_lines(text: &str) -> Vec<String> {
    let date = |w: &[u8]| {
        w.len() == 10
            && w.iter().enumerate().all(|(i, b)| match i {
                4 | 7 => *b == b'-',
                _ => b.is_ascii_digit(),
            })
    };
    text.lines()
        .enumerate()
        .filter(|(_, line)| line.as_bytes().windows(10).any(date))
        .map(|(n, line)| format!("{}: {}", n + 1, line.trim()))
        .collect()
}

#[test]
fn no_code_comment_or_map_line_names_an_issue_or_a_stop() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let map = src().join("../../docs/architecture.md");
    files.push(map.clone());
    let mut problems = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        for hit in story_references(&text) {
            problems.push(format!("{}:{hit}", path.display()));
        }
    }
    // The map holds no dated measurement either.
    for hit in dated_lines(&std::fs::read_to_string(&map).unwrap()) {
        problems.push(format!("{}:{hit} (a date)", map.display()));
    }
    assert!(
        problems.is_empty(),
        "say why, not which issue or stop:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_date_reader_finds_calendar_dates_only() {
    let hits = dated_lines("measured 2026-12-04\nv2026 12-04\n10:00:00\n(2026-1-4)");
    assert_eq!(hits, vec!["1: measured 2026-12-04"]);
}

#[test]
fn the_story_reader_finds_issues_and_stops_and_nothing_else() {
    let hits = story_references("a (issue 16)\nStop 36: x\nnonstop 3\nan issue of 4\nstop it");
    assert_eq!(hits, vec!["1: a (issue 16)", "2: Stop 36: x"]);
}

/// Spellings that belong to one type, and the file that owns the type
/// and its SQL macro: effect states in SQL (`'intent'`) and in Rust
/// (`"intent"`), trigger origins and attempt outcomes in SQL. `succeeded`, `failed` and
/// `manual` are trigger states too, `"unknown"` names error classes and
/// `"schedule"` a plan's table, so those are left to the types.
const SPELT_BY_THEIR_TYPE: &[(&str, &str)] = &[
    ("'intent'", "model/effect_state.rs"),
    ("'unknown'", "model/effect_state.rs"),
    ("'retryable'", "model/effect_state.rs"),
    ("\"intent\"", "model/effect_state.rs"),
    ("\"retryable\"", "model/effect_state.rs"),
    ("'schedule'", "model/trigger_origin.rs"),
    ("'backfill'", "model/trigger_origin.rs"),
    ("'released'", "model/state.rs"),
    ("'lease_lost'", "model/state.rs"),
    ("'expired'", "model/state.rs"),
];

/// Where `text` (the file at `rel`) spells a value outside the type that
/// owns it.
fn hand_spelt(rel: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            SPELT_BY_THEIR_TYPE
                .iter()
                .any(|(spelling, owner)| line.contains(spelling) && !rel.ends_with(owner))
        })
        .map(|(i, line)| format!("{}: {}", i + 1, line.trim()))
        .collect()
}

#[test]
fn effect_states_origins_and_outcomes_are_spelt_only_by_their_types_and_macros() {
    let mut found = Vec::new();
    for (_, path) in library_files() {
        let Some(text) = production_text(&path) else {
            continue;
        };
        let rel = path
            .strip_prefix(src())
            .unwrap()
            .to_string_lossy()
            .to_string();
        for hit in hand_spelt(&rel, &text) {
            found.push(format!("{rel}:{hit}"));
        }
    }
    assert!(
        found.is_empty(),
        "spelt by hand (use EffectState / effect_state! / effect_states!, TriggerOrigin / trigger_origin!, AttemptOutcome / attempt_outcome!):\n{}",
        found.join("\n")
    );
    assert_eq!(
        hand_spelt(
            "store/x.rs",
            "a\nWHERE state = 'retryable'\nstate: \"intent\"\nstate = 'running'\norigin = 'backfill'"
        ),
        [
            "2: WHERE state = 'retryable'",
            "3: state: \"intent\"",
            "5: origin = 'backfill'"
        ],
        "the reader finds what it looks for"
    );
    assert!(hand_spelt("model/trigger_origin.rs", "'schedule'").is_empty());
}
