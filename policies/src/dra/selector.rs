//! CEL device selectors: compiled once, evaluated per device.

use std::fmt;

use cel::{Context, Env, Program, Value};

use crate::dra::device::NodeDevice;
use crate::error::PolicyError;

/// The longest selector expression the API server accepts (10 Ki).
pub const MAX_EXPRESSION_BYTES: usize = 10 * 1024;

/// The CEL environment selectors are compiled and run in: the standard library (with
/// `matches`, by the `regex` feature) and the strings extension (`lowerAscii`, `upperAscii`,
/// `split`, `indexOf`, `replace`, `substring`, `trim`, `join`…), as the API server offers them
/// to DRA selectors (cel-go's `ext.Strings`).
static ENV: std::sync::LazyLock<std::sync::Arc<Env>> = std::sync::LazyLock::new(|| {
    let mut env = Env::stdlib();
    // The extension's names are not the standard library's: registration cannot fail.
    let added = env.add_extension(cel::extensions::strings);
    debug_assert!(added.is_ok(), "the strings extension clashes: {added:?}");
    std::sync::Arc::new(env)
});

/// A compiled CEL device selector.
pub struct DeviceSelector {
    expression: String,
    program: Program,
    /// Quoted strings in the expression that look like domains: the device's `attributes` and
    /// `capacity` maps hold an empty map for each one the device lacks, so looking up an
    /// unknown domain is an empty map (as in Kubernetes), not an error.
    domains: Vec<String>,
}

impl fmt::Debug for DeviceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceSelector")
            .field("expression", &self.expression)
            .finish()
    }
}

impl DeviceSelector {
    /// Compiles `expression`; `field` is where it was written (for the error).
    pub fn compile(field: &str, expression: &str) -> Result<Self, PolicyError> {
        let invalid = |message: String| PolicyError::InvalidSelector {
            field: field.to_owned(),
            expression: expression.to_owned(),
            message,
        };
        if expression.len() > MAX_EXPRESSION_BYTES {
            return Err(invalid(format!(
                "must be no more than {MAX_EXPRESSION_BYTES} bytes (is {})",
                expression.len()
            )));
        }
        let program = ENV
            .compile(expression)
            .map_err(|e| invalid(format!("compilation failed: {e}")))?;
        Ok(Self {
            expression: expression.to_owned(),
            program,
            domains: quoted_domains(expression),
        })
    }

    /// The expression as written.
    pub fn expression(&self) -> &str {
        &self.expression
    }
}

/// Evaluates selectors: holds the CEL context with the Kubernetes extensions registered.
pub struct SelectorEvaluator {
    root: Context<'static, 'static>,
}

impl fmt::Debug for SelectorEvaluator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SelectorEvaluator")
    }
}

impl Default for SelectorEvaluator {
    fn default() -> Self {
        let mut root = Context::with_env(ENV.clone());
        crate::dra::functions::register(&mut root);
        Self { root }
    }
}

impl SelectorEvaluator {
    /// Whether `device` satisfies `selector`. An expression that fails, or gives anything but
    /// a bool, is an error: Kubernetes aborts the allocation.
    pub fn matches(&self, selector: &DeviceSelector, device: &NodeDevice) -> Result<bool, String> {
        let mut scope = self.root.new_inner_scope();
        scope.add_variable_from_value("device", device.to_cel(&selector.domains));
        match selector.program.execute(&scope) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "{:?} gave {other:?} for device {}, not a bool",
                selector.expression, device.name
            )),
            Err(e) => Err(format!(
                "{:?} failed on device {}: {e}",
                selector.expression, device.name
            )),
        }
    }
}

/// The quoted strings of `expression` that could be domains (they contain a dot).
fn quoted_domains(expression: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = expression.chars();
    while let Some(c) = chars.next() {
        if c != '"' && c != '\'' {
            continue;
        }
        let mut s = String::new();
        let mut escaped = false;
        for d in chars.by_ref() {
            if escaped {
                escaped = false;
                s.push(d);
            } else if d == '\\' {
                escaped = true;
            } else if d == c {
                break;
            } else {
                s.push(d);
            }
        }
        if s.contains('.') && !s.contains(char::is_whitespace) && !out.contains(&s) {
            out.push(s);
        }
    }
    out
}
