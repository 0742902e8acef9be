// serve/http.cpp: the event loop under brrr serve: HTTP/1.1 connections on Boost.Beast and Asio
// (chapter 20). Read before: serve/http.h. Read next: serve/server.cpp.
//
// One io_context, run by a few I/O threads. Every connection is a Connection: its socket, a
// timer, a read buffer, and what it is doing now (its Phase). A connection's handlers run on
// its strand, one at a time, so a Connection needs no lock; different connections run on the
// I/O threads in parallel. Nothing here waits: each step starts an asynchronous operation
// (wait until readable, read the headers, write these bytes) and returns; the operation's
// handler is the next step.
//
//   kIdle ──a byte──> kHeader ──headers──> kBody ──body──> kResponding ──written──> kIdle
//     │ idle_timeout     │ header_timeout    │ body_timeout     │ (keep-alive) or close
//     └──> closed        └──> 408            └──> 408           └ write_timeout: dropped
//
// A connection that has sent nothing costs its socket, this struct and one pending one-byte
// read: a thousand of them stall nobody. Responses that take time (a completion) are streams: the
// scheduler's thread calls wake, wake posts pull to the strand, pull takes what is ready and
// queues it for the socket. A client that reads slower than its tokens come lets its queue
// grow; past stream_buffer_bytes it is dropped and its request cancelled.
#include "serve/http.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "brrr/error.h"

namespace brrr::serve {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = beast::error_code;

std::string HttpRequest::header(const std::string& name) const {
  for (const auto& [key, value] : headers)
    if (beast::iequals(key, name)) return value;
  return "";
}

namespace {

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

std::string format_seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

std::string status_line(int status) {
  const auto reason = bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(status)));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason.data(), reason.size()) + "\r\n";
}

// What every connection shares: the options, the handler, the workers for handlers that wait,
// and the set of open connections (for stop() and the count).
class Connection;
struct Shared {
  HttpOptions options;
  HttpHandler handle;
  std::function<bool(const HttpRequest&)> waits;
  std::function<std::string(int, const std::string&)> error_body;
  asio::thread_pool workers{2};
  std::atomic<bool> stopping{false};
  mutable std::mutex mutex;
  std::unordered_map<const Connection*, std::weak_ptr<Connection>> open;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, Shared& shared)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), shared_(shared), options_(shared.options) {}
  ~Connection() { forget(); }

  // Called by the acceptor: the connection's life begins on its own strand.
  void start() {
    {
      std::lock_guard<std::mutex> lock(shared_.mutex);
      shared_.open[this] = weak_from_this();
    }
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->wait_for_request(); });
  }
  // From any thread: the server stops. An idle or half-read connection closes now; one that is
  // answering closes when its answer is written.
  void stop_soon() {
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      if (self->phase_ == Phase::kResponding) self->keep_alive_ = false;
      else self->close();
    });
  }

 private:
  enum class Phase { kIdle, kHeader, kBody, kResponding, kLingering, kClosed };

  // ---- reading a request -------------------------------------------------------------------

  // Between requests: wait (idle_timeout at most) for the client's first byte. The read is of
  // one byte into the struct itself, so a waiting connection holds no buffer: it is its
  // socket, this struct and one pending read.
  void wait_for_request() {
    phase_ = Phase::kIdle;
    parser_.reset();
    if (buffer_.size() > 0) return read_header();  // the next request is already here
    buffer_.shrink_to_fit();
    arm(options_.idle_timeout_s);
    watch();
  }

  // A read of one byte. (Not async_wait for readable: Asio's epoll reactor is edge-triggered,
  // and a readiness reported before the wait was posted would be lost; a read tries the
  // socket first.) While a response is made the same read watches for the client hanging up.
  void watch() {
    if (watching_) return;
    watching_ = true;
    socket_.async_read_some(asio::buffer(&first_byte_, 1), [self = shared_from_this()](error_code ec, std::size_t n) {
      self->on_first_byte(ec, n);
    });
  }

  void on_first_byte(error_code ec, std::size_t n) {
    watching_ = false;
    if (phase_ == Phase::kClosed) return;
    if (ec || n == 0) return close();  // the client hung up (end of stream), or the socket failed
    if (phase_ == Phase::kLingering) return;  // a byte to drop (drain() reads the rest)
    // The start of a request: into the buffer the parser reads. While a response is made it
    // is the next one, sent early (pipelined): it waits there until this answer is written.
    asio::buffer_copy(buffer_.prepare(1), asio::buffer(&first_byte_, 1));
    buffer_.commit(1);
    if (phase_ == Phase::kIdle) read_header();
  }

  void read_header() {
    phase_ = Phase::kHeader;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
    parser_->body_limit(options_.max_body_bytes);
    arm(options_.header_timeout_s);
    bhttp::async_read_header(socket_, buffer_, *parser_,
                             [self = shared_from_this()](error_code ec, std::size_t) { self->on_header(ec); });
  }

  void on_header(error_code ec) {
    if (phase_ != Phase::kHeader) return;
    if (ec) return refuse(ec, "headers", options_.header_timeout_s);
    if (beast::iequals(parser_->get()[bhttp::field::expect], "100-continue")) {
      out_ += "HTTP/1.1 100 Continue\r\n\r\n";  // curl waits for this before sending a body
      flush();
    }
    if (parser_->is_done()) return dispatch();
    phase_ = Phase::kBody;
    arm(options_.body_timeout_s);
    bhttp::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](error_code e, std::size_t) {
      if (self->phase_ != Phase::kBody) return;
      if (e) return self->refuse(e, "body", self->options_.body_timeout_s);
      self->dispatch();
    });
  }

  // A read that failed: answered where there is something to say (408, 413, 431, 400), else
  // the connection just closes (the client went away).
  void refuse(error_code ec, const char* part, double limit) {
    if (timed_out_)
      return answer_and_close(408, std::string("the request's ") + part + " did not arrive within " +
                                       format_seconds(limit) + " s");
    if (ec == bhttp::error::header_limit)
      return answer_and_close(431, "the request's headers are over the limit of " +
                                       std::to_string(options_.max_header_bytes) + " bytes");
    if (ec == bhttp::error::body_limit)
      return answer_and_close(413, "the body is over the limit of " + std::to_string(options_.max_body_bytes) + " bytes");
    const bool malformed = ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
                           ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message;
    if (malformed) return answer_and_close(400, "the request could not be read (" + ec.message() + ")");
    close();
  }

  // ---- answering ---------------------------------------------------------------------------

  void dispatch() {
    disarm();
    phase_ = Phase::kResponding;
    keep_alive_ = parser_->get().keep_alive() && !shared_.stopping;
    auto request = std::make_shared<HttpRequest>(to_request(parser_->release()));
    parser_.reset();
    // Watch for a hang-up while the answer is made; not when the client has already sent more
    // (pipelined: the parser's buffer holds it, and a second read would take bytes from its middle).
    if (buffer_.size() == 0) watch();
    if (shared_.waits && shared_.waits(*request)) {
      // This handler waits (for the model): a worker runs it, and the answer comes back here.
      asio::post(shared_.workers, [self = shared_from_this(), request] {
        auto response = std::make_shared<HttpResponse>();
        self->run(*request, *response);
        asio::post(self->socket_.get_executor(), [self, response] { self->respond(std::move(*response)); });
      });
      return;
    }
    HttpResponse response;
    run(*request, response);
    respond(std::move(response));
  }

  void run(const HttpRequest& request, HttpResponse& response) {
    try {
      shared_.handle(request, response);
    } catch (const std::exception& e) {
      response = HttpResponse{};
      response.status = 500;
      response.body = shared_.error_body(500, std::string("internal error: ") + e.what());
    }
  }

  static HttpRequest to_request(bhttp::request<bhttp::string_body>&& m) {
    HttpRequest r;
    r.method = std::string(m.method_string());
    r.target = std::string(m.target());
    r.path = r.target.substr(0, r.target.find('?'));
    r.body = std::move(m.body());
    for (const auto& field : m) r.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    return r;
  }

  void respond(HttpResponse response) {
    if (phase_ != Phase::kResponding) {  // closed while a worker made the answer
      if (response.stream && response.stream->gone) response.stream->gone();
      return;
    }
    std::string head = status_line(response.status) + "Content-Type: " + response.content_type + "\r\n";
    for (const auto& [name, value] : response.headers) head += name + ": " + value + "\r\n";
    if (!keep_alive_) head += "Connection: close\r\n";
    if (!response.stream) {
      out_ += head + "Content-Length: " + std::to_string(response.body.size()) + "\r\n\r\n" + response.body;
      complete_ = true;
      return flush();
    }
    out_ += head + "Transfer-Encoding: chunked\r\n\r\n";
    complete_ = false;
    stream_ = std::move(response.stream);
    std::weak_ptr<Connection> weak = weak_from_this();
    stream_->attach([weak] {
      if (auto self = weak.lock()) self->wake();
    });
    pull();
  }

  void answer_and_close(int status, const std::string& message) {
    disarm();
    phase_ = Phase::kResponding;
    keep_alive_ = false;
    HttpResponse response;
    response.status = status;
    response.body = shared_.error_body(status, message);
    respond(std::move(response));
  }

  // Any thread: the stream has more. One pull is posted at a time (wake_posted_).
  void wake() {
    if (wake_posted_.exchange(true)) return;
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      self->wake_posted_ = false;
      self->pull();
    });
  }

  // Takes what the stream has ready, up to kPullBytes, and queues it as one chunk (HTTP/1.1
  // chunked encoding: its length in hex, CRLF, the bytes, CRLF; a zero-length chunk ends the
  // body). The bytes queued behind a write the client has not taken yet are the client's
  // backlog: past stream_buffer_bytes, it reads slower than its stream is made, and it is
  // dropped (its sequences cancelled) rather than let the server hold its whole answer.
  void pull() {
    if (phase_ != Phase::kResponding || !stream_ || complete_) return;
    std::string more;
    const bool done = stream_->pull(more, kPullBytes);
    if (!more.empty()) {
      char size[20];
      std::snprintf(size, sizeof size, "%zx\r\n", more.size());
      out_ += size + more + "\r\n";
    }
    if (done) {
      out_ += "0\r\n\r\n";
      complete_ = true;
      stream_.reset();
    }
    if (writing_now_ && out_.size() > options_.stream_buffer_bytes) return close();
    flush();
    if (!done && more.size() >= kPullBytes) wake();  // it stopped at the limit: more may be there
  }

  // One write at a time: bytes queued meanwhile wait in out_ for the next.
  void flush() {
    if (writing_now_ || out_.empty() || phase_ == Phase::kClosed) return;
    writing_.swap(out_);
    out_.clear();
    writing_now_ = true;
    if (phase_ == Phase::kResponding) arm(options_.write_timeout_s);
    asio::async_write(socket_, asio::buffer(writing_), [self = shared_from_this()](error_code ec, std::size_t) {
      self->on_written(ec);
    });
  }

  void on_written(error_code ec) {
    writing_now_ = false;
    writing_.clear();
    if (phase_ == Phase::kClosed) return;
    if (ec) return close();
    if (!out_.empty()) return flush();
    if (phase_ != Phase::kResponding) return;
    disarm();  // a stream waiting for its next tokens has no time limit: the model sets the pace
    if (!complete_) return;
    std::string().swap(writing_);  // an idle connection keeps no buffer of its last answer
    std::string().swap(out_);
    if (keep_alive_ && !shared_.stopping) return wait_for_request();
    linger();
  }

  // Closing with request bytes still unread makes the kernel send a reset, which can destroy
  // the answer before the client reads it (a 413 to a client still sending its body). So
  // close our side for writing, read and drop what still comes for up to a second, then close
  // (nginx's lingering_close).
  void linger() {
    phase_ = Phase::kLingering;
    error_code e;
    socket_.shutdown(tcp::socket::shutdown_send, e);
    arm(1.0);
    drain();
  }

  // (The end of the stream completes only the first read queued on a socket: when watch()'s
  // read is still pending, it is the one that sees the client close, and closes.)
  void drain() {
    if (!discard_) discard_ = std::make_unique<char[]>(kDiscard);
    socket_.async_read_some(asio::buffer(discard_.get(), kDiscard), [self = shared_from_this()](error_code ec, std::size_t) {
      if (self->phase_ != Phase::kLingering) return;
      if (ec) return self->close();
      self->drain();
    });
  }

  // ---- time limits and the end -------------------------------------------------------------

  // One timer per connection, set again for each phase. A handler that fires after the timer
  // was set again (its generation is old) does nothing.
  void arm(double s) {
    timed_out_ = false;
    timer_.expires_after(seconds(s));
    timer_.async_wait([self = shared_from_this(), generation = ++generation_](error_code ec) {
      if (!ec && generation == self->generation_) self->on_timeout();
    });
  }
  void disarm() {
    ++generation_;
    timer_.cancel();
  }

  void on_timeout() {
    if (phase_ == Phase::kHeader || phase_ == Phase::kBody) {
      timed_out_ = true;  // the read ends (aborted) and refuse() answers 408
      error_code e;
      socket_.cancel(e);
      return;
    }
    close();  // idle too long, a write not taken, or lingering done
  }

  void close() {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kClosed;
    if (stream_ && !complete_ && stream_->gone) stream_->gone();
    stream_.reset();
    disarm();
    error_code e;
    socket_.shutdown(tcp::socket::shutdown_both, e);
    socket_.close(e);
    forget();
  }

  void forget() {
    std::lock_guard<std::mutex> lock(shared_.mutex);
    shared_.open.erase(this);
  }

  static constexpr std::size_t kDiscard = 4096, kPullBytes = 64 << 10;
  tcp::socket socket_;  // its executor is the connection's strand: every handler runs there
  asio::steady_timer timer_;
  Shared& shared_;
  const HttpOptions& options_;
  Phase phase_ = Phase::kIdle;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::uint64_t generation_ = 0;
  bool timed_out_ = false, watching_ = false, keep_alive_ = true, complete_ = true, writing_now_ = false;
  char first_byte_ = 0;  // watch()'s one byte
  std::string out_, writing_;  // bytes queued for the socket; bytes being written now
  std::shared_ptr<HttpStream> stream_;
  std::atomic<bool> wake_posted_{false};
  std::unique_ptr<char[]> discard_;
};

// Each connection may hold a descriptor; the usual soft limit (1,024) would refuse the
// 1,000-and-first client. The hard limit is what an unprivileged process may raise it to.
void raise_open_file_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  const rlim_t wanted = std::min<rlim_t>(r.rlim_max, 1 << 16);
  if (r.rlim_cur >= wanted) return;
  r.rlim_cur = wanted;
  ::setrlimit(RLIMIT_NOFILE, &r);  // if refused, the soft limit stays: fewer clients at once
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// the loop: accept, and the I/O threads

struct HttpServer::Loop {
  Shared shared;  // first: destroyed after the io_context and the connections its handlers hold
  asio::io_context io;
  asio::strand<asio::io_context::executor_type> accept_strand{io.get_executor()};
  tcp::acceptor acceptor{accept_strand};
  asio::steady_timer pause{accept_strand};
  std::vector<std::thread> threads;
  std::atomic<bool> stopped{false};

  void accept() {
    acceptor.async_accept(asio::make_strand(io), [this](error_code ec, tcp::socket socket) {
      if (shared.stopping) return;
      if (ec) {  // most likely out of descriptors (EMFILE): try again in a moment, do not spin
        pause.expires_after(std::chrono::milliseconds(100));
        pause.async_wait([this](error_code e) {
          if (!e && !shared.stopping) accept();
        });
        return;
      }
      error_code e;
      socket.set_option(tcp::no_delay(true), e);  // each event leaves at once (Nagle would hold small writes)
      if (shared.options.send_buffer_bytes > 0)
        socket.set_option(asio::socket_base::send_buffer_size(shared.options.send_buffer_bytes), e);
      std::make_shared<Connection>(std::move(socket), shared)->start();
      accept();
    });
  }
};

HttpServer::HttpServer(HttpOptions options, HttpHandler handle, std::function<bool(const HttpRequest&)> waits,
                       std::function<std::string(int, const std::string&)> error_body)
    : loop_(std::make_unique<Loop>()) {
  loop_->shared.options = std::move(options);
  loop_->shared.handle = std::move(handle);
  loop_->shared.waits = std::move(waits);
  loop_->shared.error_body = std::move(error_body);
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind(const std::string& host, int port) {
  Loop& l = *loop_;
  raise_open_file_limit();
  error_code ec;
  tcp::resolver resolver(l.io);
  const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (!ec && !endpoints.empty()) {
    const tcp::endpoint at = endpoints.begin()->endpoint();
    l.acceptor.open(at.protocol(), ec);
    if (!ec) l.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) l.acceptor.bind(at, ec);
    // The backlog: connections the kernel completes before accept() takes them; a burst of
    // clients connecting at once must not find it full.
    if (!ec) l.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  BRRR_CHECK(!ec && !endpoints.empty(), "brrr serve: cannot listen on ", host, ":", port,
             " (the port is in use, or the host is not an address of this machine): ", ec.message());
  return l.acceptor.local_endpoint().port();
}

void HttpServer::start() {
  Loop& l = *loop_;
  l.accept();
  for (int i = 0; i < std::max(1, l.shared.options.io_threads); ++i) l.threads.emplace_back([&l] { l.io.run(); });
}

std::size_t HttpServer::open_connections() const {
  std::lock_guard<std::mutex> lock(loop_->shared.mutex);
  return loop_->shared.open.size();
}

void HttpServer::stop() {
  Loop& l = *loop_;
  if (l.stopped.exchange(true)) return;
  l.shared.stopping = true;
  asio::post(l.accept_strand, [&l] {
    error_code e;
    l.acceptor.close(e);
    l.pause.cancel();
  });
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard<std::mutex> lock(l.shared.mutex);
    for (const auto& [key, weak] : l.shared.open)
      if (auto c = weak.lock()) open.push_back(std::move(c));
  }
  for (const auto& c : open) c->stop_soon();
  open.clear();
  // Answers under way (a stream's last event and [DONE]) get up to 2 s to be written.
  for (int i = 0; i < 200 && open_connections() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  l.shared.workers.join();
  l.io.stop();
  for (auto& t : l.threads)
    if (t.joinable()) t.join();
}

}  // namespace brrr::serve
