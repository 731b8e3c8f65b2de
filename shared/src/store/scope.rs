//! List scopes: the canonical name of a filter combination.
//!
//! Every record belongs to the scopes of all subsets of its filterable attributes. Both
//! stores keep a counter per (account, scope), updated in the same transaction as the record,
//! so `total_count` of any filter combination is one counter read; the DynamoDB store also
//! keeps one list entry per scope so that every filtered list is a single `Query`.

use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};

/// Characters escaped in scope values, so values can never forge a separator.
const SCOPE_VALUE: &AsciiSet = &CONTROLS.add(b'|').add(b'=').add(b'%').add(b'#');

/// One filter term: a short attribute tag and its value.
pub type Term = (&'static str, String);

/// The scope name of a set of terms. Terms must come in the record type's fixed tag order.
pub fn scope_name(terms: &[Term]) -> String {
    if terms.is_empty() {
        return "*".to_string();
    }
    terms
        .iter()
        .map(|(tag, value)| format!("{tag}={}", utf8_percent_encode(value, SCOPE_VALUE)))
        .collect::<Vec<_>>()
        .join("|")
}

/// The names of all scopes a record with these terms belongs to (every subset, `*` first).
pub fn all_scopes(terms: &[Term]) -> Vec<String> {
    let n = terms.len();
    (0u32..(1 << n))
        .map(|mask| {
            let subset: Vec<Term> = terms
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, t)| t.clone())
                .collect();
            scope_name(&subset)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subsets_are_named_in_tag_order() {
        let terms = vec![("d", "0".to_string()), ("s", "a|b".to_string())];
        assert_eq!(
            all_scopes(&terms),
            vec!["*", "d=0", "s=a%7Cb", "d=0|s=a%7Cb"]
        );
    }

    #[test]
    fn values_cannot_forge_separators() {
        let forged = scope_name(&[("s", "x|d=1".to_string())]);
        assert_ne!(forged, scope_name(&[("s", "x".into()), ("d", "1".into())]));
    }
}
