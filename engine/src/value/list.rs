//! Lists. Redis 7.0 keeps every list in a quicklist (a linked list of listpacks), so
//! OBJECT ENCODING always answers "quicklist"; the node layout matters only to the RDB
//! encoder, which rebuilds nodes at the target's `list-max-listpack-size`.

use std::collections::VecDeque;

use super::Sds;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct List {
    pub items: VecDeque<Sds>,
}

impl List {
    pub fn from_items(items: impl IntoIterator<Item = Sds>) -> List {
        List { items: items.into_iter().collect() }
    }

    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Sds> {
        self.items.iter()
    }
}
