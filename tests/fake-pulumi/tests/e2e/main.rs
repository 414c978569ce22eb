//! End to end: drives the built `pulumi` double the way strata does. One file per idea;
//! `support` holds the workspace and the fixture projects they share.

mod cli;
mod plans;
mod signals;
mod stacks;
mod support;
