//! The FOCUS CSV passes the FinOps Foundation's own validator: PyPI `focus-validator` 2.2 for
//! FOCUS 1.2, run on `quartermaster simulate --report-dir`'s `cost.csv` (and, from
//! `report.rs`, on `quartermaster report -o csv`).
//!
//! The validator installs itself into `target/test-tools/focus-validator` on first use: it needs
//! Python 3.12 or newer (`python3.12` on PATH, else the newest pyenv 3.12+), `numpy>=2` installed
//! after it (its metadata still says `numpy<2`), `--block-download` (no spec download at run
//! time), and a working directory holding `focus_validator/rules/currency_codes.csv`.
//!
//! One rule can never pass, whatever the data: `InvoiceId-C-004-C` ("MUST be null when the charge
//! is not associated with an invoice") and `InvoiceId-C-005-C` ("MUST NOT be null when it is")
//! carry no condition in the validator's 1.2 model, so every row fails one of them; their
//! parent `InvoiceId-C-003-C` (the OR of the two) passes. Our rows are allocated estimates, not
//! invoice lines, so `InvoiceId` is null and `InvoiceId-C-005-C` is the one failure allowed —
//! every other rule must pass or be skipped.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use quartermaster_tests::quartermaster;
use quartermaster_tests::tools::{python_venv, venv_executable};

/// What the venv holds: the validator, then numpy 2 over its `numpy<2` pin.
const VALIDATOR: &str = "focus-validator==2.2.1";
const NUMPY: &str = "numpy==2.5.5";
/// The rule no dataset can pass (see the module docs), and the rules that must pass with it.
const CONTRADICTORY_RULE: &str = "InvoiceId-C-005-C";
const ITS_PASSING_SIBLINGS: [&str; 2] = ["InvoiceId-C-003-C", "InvoiceId-C-004-C"];

/// The validator's verdict on one file.
#[derive(Debug)]
pub struct Verdict {
    /// `Total | Pass | Fail | Skipped` as it prints them.
    pub counts: [usize; 4],
    /// Every rule with its status (`PASS`, `FAIL`, `SKIPPED`).
    pub rules: BTreeMap<String, String>,
    /// Its whole output, for failure messages.
    pub output: String,
}

impl Verdict {
    /// Rules that failed.
    pub fn failed(&self) -> Vec<&str> {
        self.rules
            .iter()
            .filter(|(_, s)| s.as_str() == "FAIL")
            .map(|(r, _)| r.as_str())
            .collect()
    }

    /// Panics unless every rule passed or was skipped, but for the contradictory InvoiceId
    /// rule (whose OR parent and sibling must then pass).
    pub fn assert_passes(&self, what: &str) {
        let failed = self.failed();
        let unexpected: Vec<&&str> = failed
            .iter()
            .filter(|r| **r != CONTRADICTORY_RULE)
            .collect();
        assert!(
            unexpected.is_empty(),
            "{what}: focus-validator failed rules {unexpected:?}\n{}",
            failures_section(&self.output)
        );
        if failed.contains(&CONTRADICTORY_RULE) {
            for rule in ITS_PASSING_SIBLINGS {
                assert_eq!(
                    self.rules.get(rule).map(String::as_str),
                    Some("PASS"),
                    "{what}: {rule}\n{}",
                    self.output
                );
            }
        }
        assert_eq!(self.counts[2], failed.len(), "{}", self.output);
        // The columns the issue found missing are present and their rules pass.
        for rule in [
            "ChargeFrequency-C-000-O",
            "ServiceSubcategory-C-000-O",
            "InvoiceId-C-000-O",
            "ServiceName-C-000-M",
        ] {
            assert_eq!(
                self.rules.get(rule).map(String::as_str),
                Some("PASS"),
                "{what}: {rule}\n{}",
                self.output
            );
        }
    }
}

fn failures_section(output: &str) -> &str {
    output
        .find("--- Failures ---")
        .map_or(output, |at| &output[at..])
}

/// Runs focus-validator 2.2 (FOCUS 1.2) on `csv`; panics with a clear message when the validator
/// cannot be installed or run.
pub fn validate(csv: &Path) -> Verdict {
    let venv = validator_venv().unwrap_or_else(|e| panic!("focus-validator: {e}"));
    let program = venv_executable(&venv, "focus-validator").unwrap();
    let python = venv_executable(&venv, "python").unwrap();
    // It reads `focus_validator/rules/currency_codes.csv` relative to its working directory and
    // writes a log there: a fresh directory per run.
    let work = scratch_dir("focus-validator");
    let rules = work.join("focus_validator").join("rules");
    fs::create_dir_all(&rules).unwrap();
    let package = run(Command::new(&python).args([
        "-c",
        "import focus_validator, os; print(os.path.dirname(focus_validator.__file__))",
    ]))
    .unwrap_or_else(|e| panic!("locating the focus_validator package: {e}"));
    let codes = PathBuf::from(package.trim())
        .join("rules")
        .join("currency_codes.csv");
    fs::copy(&codes, rules.join("currency_codes.csv"))
        .unwrap_or_else(|e| panic!("copying {}: {e}", codes.display()));
    let output = run(Command::new(&program)
        .arg("--data-file")
        .arg(csv)
        .args(["--validate-version", "1.2", "--block-download"])
        .current_dir(&work)
        .env("PYTHONIOENCODING", "utf-8"))
    .unwrap_or_else(|e| panic!("focus-validator on {}: {e}", csv.display()));
    let _ = fs::remove_dir_all(&work);
    parse(&output).unwrap_or_else(|e| panic!("focus-validator output: {e}\n{output}"))
}

/// Parses the console output: the `Total: … | Pass: … | Fail: … | Skipped: …` line and one
/// `<icon> RULE-ID: STATUS (…)` line per rule.
fn parse(output: &str) -> Result<Verdict, String> {
    let totals = output
        .lines()
        .find(|l| l.starts_with("Total:"))
        .ok_or("no `Total:` line")?;
    let numbers: Vec<usize> = totals
        .split('|')
        .map(|part| {
            part.rsplit(':')
                .next()
                .and_then(|n| n.trim().parse().ok())
                .ok_or_else(|| format!("cannot read {part:?}"))
        })
        .collect::<Result<_, _>>()?;
    let counts: [usize; 4] = numbers
        .try_into()
        .map_err(|_| format!("expected four counts in {totals:?}"))?;
    let mut rules = BTreeMap::new();
    for line in output.lines() {
        let Some((head, _)) = line.split_once(" (") else {
            continue;
        };
        let Some((id, status)) = head.trim_end().rsplit_once(": ") else {
            continue;
        };
        let Some(id) = id.split_whitespace().last() else {
            continue;
        };
        if ["PASS", "FAIL", "SKIPPED"].contains(&status) && !line.starts_with("- ") {
            rules.insert(id.to_owned(), status.to_owned());
        }
    }
    if rules.len() != counts[0] {
        return Err(format!(
            "{} rule lines but Total: {}",
            rules.len(),
            counts[0]
        ));
    }
    Ok(Verdict {
        counts,
        rules,
        output: output.to_owned(),
    })
}

/// `target/test-tools/focus-validator`, installed once per process (the numpy step runs outside
/// `python_venv`'s lock, so it is serialised here).
fn validator_venv() -> Result<PathBuf, String> {
    static ONCE: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut done = ONCE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(venv) = done.as_ref() {
        return Ok(venv.clone());
    }
    let python = python_3_12()?;
    let venv = python_venv("focus-validator", &python, &[VALIDATOR])?;
    let venv_python = venv_executable(&venv, "python")?;
    let has_numpy_2 = Command::new(&venv_python)
        .args([
            "-c",
            "import numpy, sys; sys.exit(0 if int(numpy.__version__.split('.')[0]) >= 2 else 1)",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_numpy_2 {
        run(Command::new(&venv_python).args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--quiet",
            NUMPY,
        ]))
        .map_err(|e| format!("installing {NUMPY} after {VALIDATOR}: {e}"))?;
    }
    *done = Some(venv.clone());
    Ok(venv)
}

/// An interpreter of Python 3.12 or newer, as an absolute path: `python3.12` on PATH, else a
/// pyenv 3.12 (`$PYENV_ROOT/versions`, `~/.pyenv/versions`), else the newest newer pyenv one,
/// else `python3` if new enough.
fn python_3_12() -> Result<String, String> {
    let mut candidates = vec!["python3.12".to_owned()];
    let roots = [
        std::env::var_os("PYENV_ROOT").map(PathBuf::from),
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")),
        Some(PathBuf::from("/root/.pyenv")),
    ];
    let mut versions: Vec<((u32, u32, u32), PathBuf)> = Vec::new();
    for root in roots.into_iter().flatten() {
        let Ok(entries) = fs::read_dir(root.join("versions")) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let parts: Vec<u32> = name.split('.').filter_map(|p| p.parse().ok()).collect();
            if let [3, minor, patch] = parts[..] {
                versions.push(((3, minor, patch), entry.path().join("bin").join("python3")));
            }
        }
    }
    // 3.12 (what the validator is released for) first, then newer ones, newest first.
    versions.sort_by_key(|(v, _)| (v.1 != 12, std::cmp::Reverse(*v)));
    candidates.extend(
        versions
            .into_iter()
            .filter(|(v, _)| v.1 >= 12)
            .map(|(_, p)| p.display().to_string()),
    );
    candidates.push("python3".to_owned());
    let check = "import sys; print(sys.executable if sys.version_info >= (3, 12) else '')";
    for candidate in &candidates {
        if let Ok(out) = run(Command::new(candidate).args(["-c", check])) {
            let executable = out.trim();
            if !executable.is_empty() {
                return Ok(executable.to_owned());
            }
        }
    }
    Err(format!(
        "focus-validator 2.2 needs Python 3.12 or newer; none found (tried {})",
        candidates.join(", ")
    ))
}

/// Runs a command; its standard output, or an error with its status and output.
fn run(command: &mut Command) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|e| format!("could not run {command:?}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{command:?} exited with {}:\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A fresh directory under the system temp dir, unique to this process and call.
pub fn scratch_dir(what: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "qm-{what}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn simulate_cost_csv_passes_focus_validator() {
    let dir = scratch_dir("focus-simulate");
    let dir_s = dir.display().to_string();
    let out = quartermaster(&["simulate", "--report-dir", &dir_s, "-o", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let verdict = validate(&dir.join("cost.csv"));
    verdict.assert_passes("simulate cost.csv");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_validator_output_is_read_rule_by_rule() {
    let sample = "\n=== Validation Results ===\nTotal: 3 | Pass: 1 | Fail: 1 | Skipped: 1\n\
        ✅ A-C-000-M: PASS  (violations=0, 1.0ms)\n\
        [FAIL] B-C-001-C: FAIL  (violations=2, msg=B: x (y), 2ms)\n\
        ⏭️ C-C-002-O: SKIPPED  (violations=0, reason=rule not applicable)\n\
        \n--- Failures ---\n- B-C-001-C: violations=2; B (z)\n";
    let v = parse(sample).unwrap();
    assert_eq!(v.counts, [3, 1, 1, 1]);
    assert_eq!(v.failed(), vec!["B-C-001-C"]);
    assert_eq!(v.rules["C-C-002-O"], "SKIPPED");
    assert!(parse("Total: 2 | Pass: 2 | Fail: 0 | Skipped: 0\n").is_err());
    assert!(parse("nothing").is_err());
}
