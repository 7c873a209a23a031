//! The new-run and keys pages: forms rendered here and driven by the script, which calls the
//! public API (so a session can do exactly what its key can).

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};

use super::super::respond::html;
use super::gate::gate;
use super::layout::{error_page, layout};
use crate::problem::ApiError;
use crate::AppState;

/// `GET /new`: the new-run form; the script fills the environments and creates the run.
pub(in crate::console) async fn new_run(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> HttpResponse {
    let who = match gate(&req, &state) {
        Ok(who) => who,
        Err(r) => return *r,
    };
    let body = "<h1>New run</h1><form id=\"new-run\" class=\"stack narrow\">\
         <label for=\"n-prompt\">Prompt</label>\
         <textarea id=\"n-prompt\" name=\"prompt\" rows=\"6\" required></textarea>\
         <label for=\"n-env\">Environment</label>\
         <select id=\"n-env\" name=\"environment_id\"><option value=\"\">The default \
         environment</option></select>\
         <label for=\"n-model\">Model <span class=\"hint\">(optional)</span></label>\
         <input id=\"n-model\" name=\"model_id\">\
         <label for=\"n-title\">Title <span class=\"hint\">(optional)</span></label>\
         <input id=\"n-title\" name=\"title\">\
         <div class=\"actions\"><button type=\"submit\">Start run</button></div>\
         <p id=\"new-result\" role=\"status\" aria-live=\"polite\"></p></form>";
    html(StatusCode::OK, layout("New run", Some(&who), "new", body))
}

/// `GET /keys`: key management, for admin keys only (the API refuses the others anyway).
pub(in crate::console) async fn keys(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let who = match gate(&req, &state) {
        Ok(who) => who,
        Err(r) => return *r,
    };
    if !who.key.admin {
        return error_page(
            Some(&who),
            &ApiError::forbidden("keys are managed with an admin key; this key is not one"),
        );
    }
    let body = "<h1>API keys</h1>\
         <form id=\"new-key\" class=\"stack narrow\"><h2>Create a key</h2>\
         <label for=\"k-name\">Name</label><input id=\"k-name\" name=\"name\" required>\
         <label for=\"k-team\">Team</label><input id=\"k-team\" name=\"team\" value=\"default\">\
         <label for=\"k-kind\">Kind</label><select id=\"k-kind\" name=\"kind\">\
         <option>personal</option><option>agent</option></select>\
         <label class=\"check\"><input type=\"checkbox\" id=\"k-admin\" name=\"admin\"> Admin \
         (may manage keys and teams)</label>\
         <div class=\"actions\"><button type=\"submit\">Create key</button></div>\
         <div id=\"key-result\" role=\"status\" aria-live=\"polite\"></div></form>\
         <h2>Keys</h2><p id=\"keys-status\" class=\"hint\" role=\"status\"></p>\
         <div class=\"table-wrap\"><table id=\"keys\"><thead><tr><th scope=\"col\">Name</th>\
         <th scope=\"col\">Id</th><th scope=\"col\">Team</th><th scope=\"col\">Kind</th>\
         <th scope=\"col\">Created</th><th scope=\"col\">State</th>\
         <th scope=\"col\"><span class=\"sr\">Actions</span></th></tr></thead>\
         <tbody id=\"key-rows\"></tbody></table></div>";
    html(StatusCode::OK, layout("Keys", Some(&who), "keys", body))
}
