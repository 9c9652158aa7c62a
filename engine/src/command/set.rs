//! set commands.

use super::Spec;

pub const SPECS: &[Spec] = &[];
