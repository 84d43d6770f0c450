//! The contract (GET / → 200, GET /user/:id → the id, POST /user → 200) on actix-web 4 with
//! one worker. Port: `$PORT` (default 3000).

use actix_web::{get, post, web, App, HttpResponse, HttpServer};

#[get("/")]
async fn index() -> HttpResponse {
    HttpResponse::Ok().finish()
}

#[get("/user/{id}")]
async fn user(id: web::Path<String>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain")
        .body(id.into_inner())
}

#[post("/user")]
async fn create_user() -> HttpResponse {
    HttpResponse::Ok().finish()
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3000);
    eprintln!("peer-actix listening on 0.0.0.0:{port}");
    HttpServer::new(|| App::new().service(index).service(user).service(create_user))
        .workers(1)
        .bind(("0.0.0.0", port))?
        .run()
        .await
}
