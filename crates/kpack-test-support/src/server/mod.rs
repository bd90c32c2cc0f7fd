//! A small HTTP/1.1 static file server on loopback for the integration tests.
//!
//! std only: one accept thread, one thread per connection.  Connections are
//! kept alive (every response carries `Content-Length`) unless the client
//! asks for `Connection: close`, speaks HTTP/1.0, or a fault drops the
//! connection.  Tests can inject faults per path pattern and inspect every
//! request the server saw, including how many body bytes were actually
//! written to the socket.
//!
//! Bookkeeping is done *before* the bytes reach the socket (the request is
//! recorded with its status before the headers are sent, and a body chunk is
//! counted before it is written and corrected if the write fails), so a test
//! that has just received a response always sees it in `requests()`.
//!
//! Where each part lives: [`TestServer`] and its accept loop in
//! `test_server`, the state its threads share and the request log in
//! `state`, [`Fault`] and how one is chosen in `fault`, reading a request in
//! `parse`, serving a connection's requests in `connection`, finding the
//! file a path names in `files`, byte ranges in `range`, the response head
//! in `head` and its body (whole or shaped by a fault) in `body`.

mod body;
mod connection;
mod fault;
mod files;
mod head;
mod parse;
mod range;
mod state;
mod test_server;

pub use fault::Fault;
pub use state::Request;
pub use test_server::TestServer;
