//! How every role dials another: explicit message bounds, HTTP/2
//! keepalive (a frozen or partitioned peer is noticed within seconds, not
//! when TCP gives up) and deadlines on unary calls.

use crate::v1::controller_client::ControllerClient;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// Largest message either side of a link encodes or decodes.
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;
/// Deadline of a unary call.
pub const UNARY_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// An endpoint with the connection settings every role uses.
pub fn endpoint(addr: &str) -> Result<Endpoint, tonic::transport::Error> {
    Ok(Endpoint::from_shared(addr.to_string())?
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true))
}

/// A controller client over `channel` with the message bounds set.
pub fn controller_client(channel: Channel) -> ControllerClient<Channel> {
    ControllerClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

/// Connects to a controller.
pub async fn controller(addr: &str) -> Result<ControllerClient<Channel>, tonic::transport::Error> {
    Ok(controller_client(endpoint(addr)?.connect().await?))
}

/// A unary request with its deadline.
pub fn unary<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(UNARY_TIMEOUT);
    r
}

/// A server with the settings every role's listener uses: unary
/// deadlines, a bound on requests in flight per connection, and HTTP/2
/// keepalive so dead clients free their streams.
pub fn server(timeout: Duration, concurrency_per_connection: usize) -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .timeout(timeout)
        .concurrency_limit_per_connection(concurrency_per_connection)
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
}
