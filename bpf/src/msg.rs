//! Messages that name what an object holds. An object chooses how many programs and maps it has
//! and how long their names are, so a message built from such a list names only the first few,
//! each cut to a bounded length, and counts the rest: an error line stays short however large
//! the object (a list of 20 000 programs once made a line of 557 KB, issue 33).

use alloc::borrow::Cow;
use alloc::format;
use alloc::string::String;
use core::fmt::{Display, Write as _};

/// How many items of a list a message names; the rest are counted.
pub const LISTED: usize = 3;

/// How many characters of one name a message shows.
pub const NAME_CHARS: usize = 48;

/// `name` as a message shows it: whole up to [`NAME_CHARS`] characters, else its first
/// [`NAME_CHARS`] followed by "...".
#[must_use]
pub fn clip(name: &str) -> Cow<'_, str> {
    match name.char_indices().nth(NAME_CHARS) {
        Some((cut, _)) => Cow::Owned(format!("{}...", &name[..cut])),
        None => Cow::Borrowed(name),
    }
}

/// The first [`LISTED`] items, separated by ", ", then "and N more" when there are others;
/// "none" for an empty list. Only the items named are formatted, so the cost does not grow with
/// the list either. Items that are names should be [`clip`]ped.
#[must_use]
pub fn list<I>(items: I) -> String
where
    I: IntoIterator,
    I::IntoIter: ExactSizeIterator,
    I::Item: Display,
{
    let items = items.into_iter();
    let total = items.len();
    if total == 0 {
        return "none".into();
    }
    let mut out = String::new();
    for (i, item) in items.take(LISTED).enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        // Writing into a String cannot fail.
        let _ = write!(out, "{item}");
    }
    if total > LISTED {
        let _ = write!(out, " and {} more", total - LISTED);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec::Vec;

    #[test]
    fn lists_name_the_first_few_and_count_the_rest() {
        let none: [&str; 0] = [];
        assert_eq!(list(none), "none");
        assert_eq!(list(["a", "b"]), "a, b");
        assert_eq!(list(["a", "b", "c"]), "a, b, c");
        let many: Vec<String> = (0..20_000).map(|i| i.to_string()).collect();
        assert_eq!(list(&many), "0, 1, 2 and 19997 more");
    }

    #[test]
    fn long_names_are_cut_on_a_character_boundary() {
        assert_eq!(clip("xdp_prog"), "xdp_prog");
        let exact = "x".repeat(NAME_CHARS);
        assert_eq!(clip(&exact), exact.as_str());
        let long = "é".repeat(100_000);
        let cut = clip(&long);
        assert_eq!(cut.chars().count(), NAME_CHARS + 3);
        assert!(cut.ends_with("é..."), "{cut}");
    }
}
