//! [`Rare`]: a field of a profile entry that most entries leave unset, kept out of line.

use std::ops::Deref;

/// A value most entries leave empty, kept out of line: 8 bytes in the entry instead of
/// the value's own size (an estate of thousands of entries otherwise holds megabytes of
/// empty fields for the whole run). Read as the value (`Deref`), its empty form when
/// unset; an empty value is never boxed.
#[derive(Clone)]
pub struct Rare<T>(Option<Box<T>>);

/// A value with an empty form that lives for the whole program.
pub trait Empty: 'static {
    fn empty() -> &'static Self;
    fn is_empty_value(&self) -> bool;
}

impl<T> Default for Rare<T> {
    fn default() -> Self {
        Rare(None)
    }
}

impl<T: Empty> From<T> for Rare<T> {
    fn from(value: T) -> Self {
        if value.is_empty_value() {
            Rare(None)
        } else {
            Rare(Some(Box::new(value)))
        }
    }
}

impl<T: Empty> Deref for Rare<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0.as_deref().unwrap_or_else(|| T::empty())
    }
}

impl<'a, T: Empty> IntoIterator for &'a Rare<T>
where
    &'a T: IntoIterator,
{
    type Item = <&'a T as IntoIterator>::Item;
    type IntoIter = <&'a T as IntoIterator>::IntoIter;
    fn into_iter(self) -> Self::IntoIter {
        (**self).into_iter()
    }
}

/// Serialized as the value it reads as (an unset field as its empty form).
impl<T: Empty + serde::Serialize> serde::Serialize for Rare<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<T: Empty + std::fmt::Debug> std::fmt::Debug for Rare<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: 'static> Empty for Vec<T> {
    fn empty() -> &'static Self {
        const { &Vec::new() }
    }
    fn is_empty_value(&self) -> bool {
        self.is_empty()
    }
}

impl<T: 'static> Empty for Option<T> {
    fn empty() -> &'static Self {
        const { &None }
    }
    fn is_empty_value(&self) -> bool {
        self.is_none()
    }
}

impl<K: 'static, V: 'static> Empty for std::collections::BTreeMap<K, V> {
    fn empty() -> &'static Self {
        const { &std::collections::BTreeMap::new() }
    }
    fn is_empty_value(&self) -> bool {
        self.is_empty()
    }
}

impl Empty for serde_yaml::Mapping {
    fn empty() -> &'static Self {
        static EMPTY: std::sync::OnceLock<serde_yaml::Mapping> = std::sync::OnceLock::new();
        EMPTY.get_or_init(serde_yaml::Mapping::new)
    }
    fn is_empty_value(&self) -> bool {
        self.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_value_is_not_boxed_and_reads_as_empty() {
        let none: Rare<Vec<String>> = Vec::new().into();
        assert!(none.0.is_none());
        assert!(none.is_empty());
        let some: Rare<Vec<String>> = vec!["a".to_string()].into();
        assert_eq!(*some, ["a"]);
        let unset: Rare<Option<String>> = Rare::default();
        assert_eq!(unset.as_deref(), None);
        let map: Rare<serde_yaml::Mapping> = Default::default();
        assert!(map.is_empty());
    }

    #[test]
    fn it_takes_a_word_in_the_entry() {
        assert_eq!(std::mem::size_of::<Rare<serde_yaml::Mapping>>(), 8);
        assert!(std::mem::size_of::<crate::workspace::Entry>() <= 240);
    }
}
