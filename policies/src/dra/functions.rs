//! The Kubernetes CEL extensions DRA selectors use: quantities (`quantity("40Gi")`,
//! `compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`, `asApproximateFloat`,
//! `isInteger`, `sign`, `add`, `sub`, `isQuantity`) and semantic versions (`semver("1.2.3")`,
//! `compareTo`, `isGreaterThan`, `isLessThan`, `major`, `minor`, `patch`, `isSemver`), as the
//! API server's CEL libraries define them.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::extractors::This;
use cel::objects::{Opaque, ResolveResult};
use cel::{Context, FunctionContext, Value};

use crate::quantity::{Millis, parse_quantity};

/// A Kubernetes quantity inside CEL. Equal when their values are (`1` == `1000m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Quantity(Millis);

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A semantic version inside CEL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Semver(semver::Version);

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

/// A quantity as a CEL value.
pub(crate) fn quantity_value(q: Millis) -> Value {
    Value::Opaque(Arc::new(Quantity(q)))
}

/// A version as a CEL value.
pub(crate) fn semver_value(v: semver::Version) -> Value {
    Value::Opaque(Arc::new(Semver(v)))
}

/// Registers the extensions on a root context.
pub(crate) fn register(ctx: &mut Context<'_, '_>) {
    // The names are not the standard library's: registration cannot fail.
    let add = |name: &str, result: Result<(), cel::DeclarationError>| {
        debug_assert!(result.is_ok(), "{name} clashes with a standard function");
    };
    add("quantity", ctx.add_function("quantity", quantity));
    add("isQuantity", ctx.add_function("isQuantity", is_quantity));
    add("semver", ctx.add_function("semver", semver_fn));
    add("isSemver", ctx.add_function("isSemver", is_semver));
    add("compareTo", ctx.add_function("compareTo", compare_to));
    add(
        "isGreaterThan",
        ctx.add_function("isGreaterThan", is_greater_than),
    );
    add("isLessThan", ctx.add_function("isLessThan", is_less_than));
    add("asInteger", ctx.add_function("asInteger", as_integer));
    add(
        "asApproximateFloat",
        ctx.add_function("asApproximateFloat", as_approximate_float),
    );
    add("isInteger", ctx.add_function("isInteger", is_integer));
    add("sign", ctx.add_function("sign", sign));
    add("add", ctx.add_function("add", add_quantity));
    add("sub", ctx.add_function("sub", sub_quantity));
    add("major", ctx.add_function("major", major));
    add("minor", ctx.add_function("minor", minor));
    add("patch", ctx.add_function("patch", patch));
}

fn quantity(ftx: &FunctionContext, s: Arc<String>) -> ResolveResult {
    parse_quantity(&s)
        .map(quantity_value)
        .map_err(|e| ftx.error(format!("quantity({s:?}): {e}")))
}

fn is_quantity(s: Arc<String>) -> bool {
    parse_quantity(&s).is_ok()
}

fn semver_fn(ftx: &FunctionContext, s: Arc<String>) -> ResolveResult {
    semver::Version::parse(&s)
        .map(semver_value)
        .map_err(|e| ftx.error(format!("semver({s:?}): {e}")))
}

fn is_semver(s: Arc<String>) -> bool {
    semver::Version::parse(&s).is_ok()
}

fn as_quantity(ftx: &FunctionContext, v: &Value) -> Result<Millis, cel::ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Quantity>().map(|q| q.0),
        Value::Int(i) => Some(Millis::from_whole(*i)),
        _ => None,
    }
    .ok_or_else(|| ftx.error(format!("{} expects a quantity, got {v:?}", ftx.name)))
}

fn as_semver(v: &Value) -> Option<&semver::Version> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Semver>().map(|s| &s.0),
        _ => None,
    }
}

/// Orders two quantities or two versions.
fn order(
    ftx: &FunctionContext,
    this: &Value,
    other: &Value,
) -> Result<Ordering, cel::ExecutionError> {
    if let (Some(a), Some(b)) = (as_semver(this), as_semver(other)) {
        return Ok(a.cmp(b));
    }
    if as_semver(this).is_some() || as_semver(other).is_some() {
        return Err(ftx.error(format!(
            "{} compares two versions or two quantities",
            ftx.name
        )));
    }
    Ok(as_quantity(ftx, this)?.cmp(&as_quantity(ftx, other)?))
}

fn compare_to(ftx: &FunctionContext, This(this): This<Value>, other: Value) -> ResolveResult {
    Ok(Value::Int(order(ftx, &this, &other)? as i64))
}

fn is_greater_than(ftx: &FunctionContext, This(this): This<Value>, other: Value) -> ResolveResult {
    Ok(Value::Bool(order(ftx, &this, &other)? == Ordering::Greater))
}

fn is_less_than(ftx: &FunctionContext, This(this): This<Value>, other: Value) -> ResolveResult {
    Ok(Value::Bool(order(ftx, &this, &other)? == Ordering::Less))
}

fn as_integer(ftx: &FunctionContext, This(this): This<Value>) -> ResolveResult {
    let q = as_quantity(ftx, &this)?;
    if q.millis() % 1000 != 0 {
        return Err(ftx.error(format!("{q} is not an integer")));
    }
    i64::try_from(q.millis() / 1000)
        .map(Value::Int)
        .map_err(|_| ftx.error(format!("{q} does not fit an int")))
}

fn as_approximate_float(ftx: &FunctionContext, This(this): This<Value>) -> ResolveResult {
    Ok(Value::Float(as_quantity(ftx, &this)?.as_f64()))
}

fn is_integer(ftx: &FunctionContext, This(this): This<Value>) -> ResolveResult {
    Ok(Value::Bool(as_quantity(ftx, &this)?.millis() % 1000 == 0))
}

fn sign(ftx: &FunctionContext, This(this): This<Value>) -> ResolveResult {
    Ok(Value::Int(as_quantity(ftx, &this)?.millis().signum() as i64))
}

fn add_quantity(ftx: &FunctionContext, This(this): This<Value>, other: Value) -> ResolveResult {
    let sum = as_quantity(ftx, &this)?
        .checked_add(as_quantity(ftx, &other)?)
        .ok_or_else(|| ftx.error("quantity overflow"))?;
    Ok(quantity_value(sum))
}

fn sub_quantity(ftx: &FunctionContext, This(this): This<Value>, other: Value) -> ResolveResult {
    let a = as_quantity(ftx, &this)?;
    let b = as_quantity(ftx, &other)?;
    Ok(quantity_value(Millis::from_millis(a.millis() - b.millis())))
}

fn version_part(
    ftx: &FunctionContext,
    this: &Value,
    part: fn(&semver::Version) -> u64,
) -> ResolveResult {
    let v = as_semver(this).ok_or_else(|| ftx.error(format!("{} expects a version", ftx.name)))?;
    Ok(Value::Int(part(v) as i64))
}

fn major(ftx: &FunctionContext, This(this): This<Value>) -> ResolveResult {
    version_part(ftx, &this, |v| v.major)
}

fn minor(ftx: &FunctionContext, This(this): This<Value>) -> ResolveResult {
    version_part(ftx, &this, |v| v.minor)
}

fn patch(ftx: &FunctionContext, This(this): This<Value>) -> ResolveResult {
    version_part(ftx, &this, |v| v.patch)
}
