//! Writing a page a part at a time: a template with slots, each filled by a part that
//! writes itself, so what is long (rows by the thousand) is never held whole.

use std::io::Write;

use maud::Markup;

/// Where a part written on its own goes in a template: markup that escaped text
/// (every value maud writes) can never contain.
pub(super) const SLOT: &str = "<strata-slot>";

/// A part of the page written to `out` by itself (see [`write_around`]).
pub(super) type Part<'a> = &'a mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>;

/// Writes `template` to `out`, each of its [`SLOT`]s, in order, filled by the next of
/// `parts`.
pub(super) fn write_around(
    out: &mut dyn Write,
    template: Markup,
    parts: &mut [Part],
) -> std::io::Result<()> {
    let text = template.into_string();
    let mut pieces = text.split(SLOT);
    if let Some(first) = pieces.next() {
        out.write_all(first.as_bytes())?;
    }
    for (piece, part) in pieces.zip(parts.iter_mut()) {
        part(out)?;
        out.write_all(piece.as_bytes())?;
    }
    Ok(())
}
