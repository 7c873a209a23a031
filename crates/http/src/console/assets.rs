//! The console's stylesheet and script, embedded in the binary at build time: the page loads
//! nothing from anywhere else, and no Node or bundler is involved. Each is served under a name
//! that carries a digest of its bytes, so a browser may cache it for good and still never runs
//! an old script against a new server.

use std::sync::OnceLock;

use actix_web::http::header;
use actix_web::{web, HttpResponse};

/// One embedded file.
pub struct Asset {
    /// The name it is served under before the digest (`console.css`).
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
    url: OnceLock<String>,
}

impl Asset {
    /// `/console/assets/<stem>.<digest>.<ext>`: changes whenever the bytes do.
    pub fn url(&self) -> &str {
        self.url.get_or_init(|| {
            use sha2::{Digest, Sha256};
            let digest = Sha256::digest(self.bytes);
            let short: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
            let (stem, ext) = self.name.rsplit_once('.').unwrap_or((self.name, ""));
            format!("/console/assets/{stem}.{short}.{ext}")
        })
    }
}

pub static CSS: Asset = Asset {
    name: "console.css",
    content_type: "text/css; charset=utf-8",
    bytes: include_bytes!("assets/console.css"),
    url: OnceLock::new(),
};

pub static JS: Asset = Asset {
    name: "console.js",
    content_type: "text/javascript; charset=utf-8",
    bytes: include_bytes!("assets/console.js"),
    url: OnceLock::new(),
};

/// `GET /console/assets/{name}`: only the current digest's names exist.
pub async fn serve(name: web::Path<String>) -> HttpResponse {
    let wanted = format!("/console/assets/{name}");
    match [&CSS, &JS].into_iter().find(|a| a.url() == wanted) {
        Some(asset) => HttpResponse::Ok()
            .content_type(asset.content_type)
            .insert_header((header::CACHE_CONTROL, "public, max-age=31536000, immutable"))
            .body(asset.bytes),
        None => HttpResponse::NotFound().finish(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asset_names_carry_a_digest_of_their_bytes() {
        assert!(CSS.url().starts_with("/console/assets/console."));
        assert!(CSS.url().ends_with(".css"));
        assert!(JS.url().ends_with(".js"));
        assert_eq!(JS.url().len(), "/console/assets/console..js".len() + 12);
    }
}
