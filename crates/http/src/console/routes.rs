//! The console's routes: which page answers which path. It maps; the pages decide.

use actix_web::web;

use super::{assets, pages};

/// Registers the console's routes. `/sessions/{run_id}` (the shareable transcript page) is
/// the HTTP layer's and stays as it is.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/").get(pages::home))
        .service(
            web::resource("/signin")
                .get(pages::signin_form)
                .post(pages::signin),
        )
        .service(web::resource("/signout").post(pages::signout))
        .service(web::resource("/runs").get(pages::runs))
        .service(web::resource("/runs/{run_id}").get(pages::run))
        .service(web::resource("/new").get(pages::new_run))
        .service(web::resource("/keys").get(pages::keys))
        .service(web::resource("/console/assets/{name}").get(assets::serve));
}
