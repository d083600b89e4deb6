//! Temporary stand-in until bound.rs lands: a valid but weak bound (0).
#![allow(missing_docs)]
use crate::resources::Resources;
pub struct BoundClass {
    pub count: u64,
    pub requests: Resources,
    pub shapes: Vec<usize>,
}
pub struct BoundShape {
    pub price: f64,
    pub capacity: Resources,
    pub max_copies: Option<f64>,
}
pub struct BoundInput {
    pub classes: Vec<BoundClass>,
    pub shapes: Vec<BoundShape>,
}
pub struct LowerBound {
    pub dollars_per_hour: f64,
}
pub fn lower_bound(_input: &BoundInput) -> LowerBound {
    LowerBound {
        dollars_per_hour: 0.0,
    }
}
