//! In-memory layouts (filled in by the layout work).
