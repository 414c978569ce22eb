//! A panic on a step's thread, caught: the step fails with what the panic said and where,
//! instead of leaving the scheduler waiting for it forever (with the stack locked).

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::sync::Once;

/// What a caught panic said, and where in strata's code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Panic {
    pub message: String,
    pub location: Option<String>,
}

impl Panic {
    /// The failed step's message.
    pub fn describe(&self) -> String {
        format!(
            "strata failed inside this step: it panicked{}: {} (a bug in strata: please report it with this message)",
            self.location
                .as_ref()
                .map(|l| format!(" at {l}"))
                .unwrap_or_default(),
            self.message
        )
    }
}

thread_local! {
    /// How many `catch` calls this thread is inside.
    static CATCHING: Cell<usize> = const { Cell::new(0) };
    /// The last panic the hook saw on this thread while catching.
    static SEEN: RefCell<Option<Panic>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread; a panic in it is returned, not propagated. While `f` runs,
/// the panic hook keeps the panic's message and place for the caller instead of printing
/// them (the step's failure says them, redacted).
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, Panic> {
    install_hook();
    CATCHING.with(|c| c.set(c.get() + 1));
    let result = std::panic::catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(c.get().saturating_sub(1)));
    result.map_err(|payload| {
        let seen = SEEN.with(|s| s.borrow_mut().take());
        seen.unwrap_or_else(|| Panic {
            message: payload_text(payload.as_ref()),
            location: None,
        })
    })
}

/// Installs, once, the hook that keeps the panics of threads inside [`catch`]; every
/// other panic goes to the hook that was there before.
fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info: &PanicHookInfo| {
            if CATCHING.with(Cell::get) == 0 {
                return previous(info);
            }
            let panic = Panic {
                message: payload_text(info.payload()),
                location: info.location().map(|l| l.to_string()),
            };
            SEEN.with(|s| *s.borrow_mut() = Some(panic));
        }));
    });
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_caught_with_its_message_and_place_and_a_value_passes_through() {
        assert_eq!(catch(|| 7), Ok(7));
        let p = catch(|| -> u32 { panic!("overflow of {}", "a wait") }).unwrap_err();
        assert_eq!(p.message, "overflow of a wait");
        assert!(
            p.location
                .as_deref()
                .is_some_and(|l| l.starts_with("src/run/scheduler/panics.rs:")),
            "{p:?}"
        );
        let text = p.describe();
        assert!(
            text.contains("panicked at src/run/scheduler/panics.rs:")
                && text.ends_with(
                    "overflow of a wait (a bug in strata: please report it with this message)"
                ),
            "{text}"
        );
        // Nested: the inner catch takes its own panic; the outer one sees none.
        let outer = catch(|| catch(|| panic!("inner")).unwrap_err().message);
        assert_eq!(outer, Ok("inner".to_string()));
    }
}
