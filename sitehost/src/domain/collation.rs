//! The order of names in lists (businesses, locations, sites): accent-insensitive and
//! case-insensitive, as the platform's database orders them (MySQL `utf8mb4_general_ci`,
//! PostgreSQL `en-US`): "Éclair" sits with the E's, "Ñandú" with the N's, "Österreich" with
//! the O's. Both stores sort by the key this gives, ties broken by id.

use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategoryGroup, UnicodeGeneralCategory};

/// Letters with no decomposition, folded to what the platform's collations file them
/// under.
fn fold_letter(c: char) -> Option<&'static str> {
    Some(match c {
        'ß' | 'ẞ' => "ss",
        'æ' | 'Æ' => "ae",
        'œ' | 'Œ' => "oe",
        'ø' | 'Ø' => "o",
        'đ' | 'Đ' | 'ð' | 'Ð' => "d",
        'ł' | 'Ł' => "l",
        'ħ' | 'Ħ' => "h",
        'ı' => "i",
        'þ' | 'Þ' => "th",
        _ => return None,
    })
}

/// The sort key of a name: compatibility-decomposed, marks dropped, letters folded
/// ([`fold_letter`]), lower case. Two names that differ only in accents or case have the
/// same key (the stores then order them by id).
pub fn sort_key(name: &str) -> String {
    let mut key = String::with_capacity(name.len());
    for c in name.nfkd() {
        if c.general_category_group() == GeneralCategoryGroup::Mark {
            continue;
        }
        match fold_letter(c) {
            Some(folded) => key.push_str(folded),
            None => key.extend(c.to_lowercase()),
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accents_and_case_sort_with_their_base_letter() {
        let mut names = vec![
            "zzz",
            "Österreich",
            "Éclair House",
            "apple",
            "Ñandú",
            "eagle",
            "Straße",
            "nut",
        ];
        names.sort_by_key(|n| sort_key(n));
        assert_eq!(
            names,
            [
                "apple",
                "eagle",
                "Éclair House",
                "Ñandú",
                "nut",
                "Österreich",
                "Straße",
                "zzz"
            ]
        );
        assert_eq!(sort_key("ÉCLAIR"), sort_key("eclair"));
        assert_eq!(sort_key("Ｅｃｌａｉｒ"), "eclair");
    }
}
