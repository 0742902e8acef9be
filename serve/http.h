// serve/http.h: brrr serve's HTTP/1.1 transport: connections on an event loop (Boost.Beast on
// Asio), handing each whole request to one function and writing its response back.
// Chapter 20 (serving). Read before: serve/scheduler.h (the Mailbox a stream reads).
// Read next: serve/http.cpp (the loop itself), then serve/server.cpp (the routes).
//
// A thread per connection costs a stack and a scheduler entry for every client, even one that
// says nothing: 200 clients that send half a request and wait took every thread of the old pool.
// Here a connection is a socket, a small struct and a timer; a few I/O threads serve them all,
// each doing only what is ready (a request has arrived, a socket can take more bytes), never
// waiting. nginx and uvicorn hold tens of thousands of idle connections this way.
//
// The limits, each answered and then the connection closed:
//   headers not all there header_timeout after the request's first byte   408
//   a body not all there body_timeout after its headers                    408
//   headers over max_header_bytes                                          431
//   a body over max_body_bytes                                             413
//   a stream whose client reads slower than it is produced: once stream_buffer_bytes wait
//   unwritten, the client is dropped (the response cannot be finished, so it is cut)
//   a connection with no request under way for idle_timeout: closed (nothing to answer)
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace brrr::serve {

struct HttpOptions {
  int io_threads = 2;                    // the event loop's threads (the model has its own)
  std::size_t max_header_bytes = 16 << 10;
  std::size_t max_body_bytes = 1 << 20;
  double header_timeout_s = 10;          // from a request's first byte to its headers' end
  double body_timeout_s = 30;            // from the headers' end to the body's
  double idle_timeout_s = 60;            // a keep-alive connection with no request under way
  double write_timeout_s = 60;           // a write the client does not take within this: dropped
  std::size_t stream_buffer_bytes = 1 << 20;  // a stream's unwritten bytes beyond which its client is dropped
  int send_buffer_bytes = 0;             // SO_SNDBUF of each connection (0: the kernel's own sizing)
};

struct HttpRequest {
  std::string method, target, path, body;  // path: the target without its ?query
  std::vector<std::pair<std::string, std::string>> headers;
  // A header's value ("" when absent); names compare without case, as HTTP says.
  std::string header(const std::string& name) const;
};

// A body written as it is produced, for server-sent events. The connection calls pull on its
// strand (never two at once): pull appends what is ready to out, stopping once out holds
// `max` bytes or more (the connection pulls again for the rest), and says whether the body is
// complete. attach is called once, before the first pull, with wake: whoever produces (the
// scheduler's thread) calls wake when there is more, from any thread, and the connection
// pulls again soon after. gone is called once if the connection ends before the body does
// (the client hung up, was too slow, or the server stops).
struct HttpStream {
  std::function<bool(std::string& out, std::size_t max)> pull;
  std::function<void(std::function<void()> wake)> attach;
  std::function<void()> gone;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json", body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::shared_ptr<HttpStream> stream;  // set: the body is this stream (chunked), not `body`

  void set_content(std::string b, std::string type) { body = std::move(b), content_type = std::move(type); }
  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
};

// Answers one request. It runs on an I/O thread, so it must not wait, unless `waits` says so
// for that request: then it runs on a worker thread and the I/O threads go on.
using HttpHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

class HttpServer {
 public:
  // error_body(status, message): the body of a response the transport makes itself (408, 413, ...).
  HttpServer(HttpOptions options, HttpHandler handle, std::function<bool(const HttpRequest&)> waits,
             std::function<std::string(int, const std::string&)> error_body);
  ~HttpServer();  // stop()

  // Listens on host:port (port 0: a free one) and returns the port; throws a brrr::Error when
  // it cannot. Raises this process's open-file limit to its hard limit (65,536 at most): each
  // connection is a descriptor.
  int bind(const std::string& host, int port);
  // Starts the I/O threads (after bind).
  void start();
  // Stops accepting, lets responses under way finish for up to 2 s (a stream's last event and
  // [DONE]), closes every connection and joins the threads. Idempotent.
  void stop();
  std::size_t open_connections() const;

 private:
  struct Loop;
  std::unique_ptr<Loop> loop_;
};

}  // namespace brrr::serve
