//! What may go out: the verdict of a profile's `policy:` and `approve:` rules on a
//! project's planned changes ([`rules`], [`denial::Denial`]), the output contracts
//! between projects ([`contracts`]), and the plans `approve:` holds ([`approvals`]).

pub mod approvals;
pub mod contracts;
pub mod denial;
pub mod rules;
