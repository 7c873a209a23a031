//! The console's pages, rendered on the server: each is a complete HTML document that is
//! useful before its script runs (the runs page carries its first page of runs; the run page
//! its details), with every value from a run or a key escaped. Live parts (transcript, events,
//! polling, forms that call the API) are the script's (`assets/console.js`).

mod changes_event;
mod display;
mod family;
mod filters;
mod forms;
mod gate;
mod layout;
mod list;
mod provenance;
mod review;
mod run;
mod signin;
mod timeline;

pub(super) use forms::{keys, new_run};
pub(super) use list::runs;
pub(super) use run::run;
pub(super) use signin::{home, signin, signin_form, signout};
