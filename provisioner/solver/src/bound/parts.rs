//! Splits the reduced problem into its independent parts: classes linked by a shape that may
//! host both, shapes with the classes they may host.
//!
//! No copy can hold pods of two parts, so every packing is a packing of each part, its cost the
//! sum of theirs, and a valid bound of each part adds up to a valid bound of the whole. The
//! integral arguments (covers, the next achievable cost) are much stronger per part: a CPU pool
//! whose pods need 1.3 machines costs two whatever the GPU pool beside it buys.

use super::prep::{Class, Problem, Shape};

/// The parts of `problem`, each with its classes and shapes in their original order; one part
/// when everything is linked (returned as it is).
pub(super) fn split(problem: Problem) -> Vec<Problem> {
    let n = problem.classes.len();
    let mut parent: Vec<usize> = (0..n).collect();
    for shape in &problem.shapes {
        if let Some((&first, rest)) = shape.classes.split_first() {
            for &c in rest {
                let a = find(&mut parent, first);
                let b = find(&mut parent, c);
                // The smaller index is the root: parts come out in class order.
                if a < b {
                    parent[b] = a;
                } else if b < a {
                    parent[a] = b;
                }
            }
        }
    }
    let roots: Vec<usize> = (0..n).map(|c| find(&mut parent, c)).collect();
    let mut part_of_root = vec![usize::MAX; n];
    let mut parts = 0usize;
    for c in 0..n {
        if part_of_root[roots[c]] == usize::MAX {
            part_of_root[roots[c]] = parts;
            parts += 1;
        }
    }
    if parts <= 1 {
        return vec![problem];
    }
    let part_of_class: Vec<usize> = roots.iter().map(|&r| part_of_root[r]).collect();
    // New index of every class and shape within its part.
    let mut class_index = vec![0usize; n];
    let mut counts = vec![0usize; parts];
    for c in 0..n {
        class_index[c] = counts[part_of_class[c]];
        counts[part_of_class[c]] += 1;
    }
    let mut shape_part = vec![usize::MAX; problem.shapes.len()];
    let mut shape_index = vec![0usize; problem.shapes.len()];
    let mut shape_counts = vec![0usize; parts];
    for (s, shape) in problem.shapes.iter().enumerate() {
        if let Some(&c) = shape.classes.first() {
            let p = part_of_class[c];
            shape_part[s] = p;
            shape_index[s] = shape_counts[p];
            shape_counts[p] += 1;
        }
    }
    let mut out: Vec<Problem> = (0..parts).map(|_| Problem::default()).collect();
    let Problem { classes, shapes } = problem;
    for (s, shape) in shapes.into_iter().enumerate() {
        let p = shape_part[s];
        if p == usize::MAX {
            continue;
        }
        out[p].shapes.push(Shape {
            classes: shape.classes.iter().map(|&c| class_index[c]).collect(),
            ..shape
        });
    }
    for (c, class) in classes.into_iter().enumerate() {
        let shapes = class
            .shapes
            .iter()
            .map(|&(s, i)| (shape_index[s], i))
            .collect();
        out[part_of_class[c]]
            .classes
            .push(Class { shapes, ..class });
    }
    out
}

fn find(parent: &mut [usize], mut c: usize) -> usize {
    while parent[c] != c {
        parent[c] = parent[parent[c]];
        c = parent[c];
    }
    c
}
