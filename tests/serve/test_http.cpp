// tests/serve/test_http.cpp: brrr serve's transport (serve/http.h, chapter 20) against clients
// that misbehave: a thousand that stall halfway through a request, headers and bodies that
// never finish (408), a connection left idle, and a stream reader too slow to keep up. Each
// server here has short limits set by its options, so every case takes well under a second of
// waiting.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "serve/server.h"

using namespace brrr;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

const char* kAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ .,;:!?'\n";

// tiny: a step takes microseconds. slower: 3 layers, 192 wide, so a step of 8 sequences takes
// a good part of a millisecond and a stream's 200 tokens a good part of a second.
serve::LoadedModel model_loaded(bool slower) {
  models::GPTConfig c;
  c.vocab_size = 65, c.block_size = slower ? 256 : 48, c.n_layer = slower ? 3 : 2, c.n_head = 2,
  c.n_embd = slower ? 192 : 40;
  Generator gen(11);
  auto model = std::make_shared<models::GPT>(c, gen);
  model->eval();
  return {model, tokenizer::TextTokenizer::train("char", kAlphabet, 0, false)};
}

struct Running {
  serve::Server server;
  int port;
  explicit Running(serve::ServerOptions o, bool slower = false)
      : server((o.port = 0, o), [slower] { return model_loaded(slower); }), port(server.bind()) {
    server.start();
    for (int i = 0; i < 2000 && !server.ready(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(server.ready());
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    return c;
  }
};

// A raw TCP connection to the server (rcvbuf > 0: its receive buffer, set before connecting).
int connect_to(const Running& r, int rcvbuf = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  if (rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(r.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  return fd;
}

void send_all(int fd, const std::string& bytes) {
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
}

// Everything the server sends until it closes the connection or `limit` passes; `closed` says
// which it was.
std::string read_until_closed(int fd, double limit, bool& closed) {
  std::string got;
  const auto end = Clock::now() + std::chrono::duration<double>(limit);
  closed = false;
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) {
      closed = true;
      break;
    }
    got.append(buffer, static_cast<std::size_t>(n));
  }
  return got;
}

std::uint64_t metric_of(const Running& r, const std::string& name) {
  auto m = r.client().Get("/metrics");
  REQUIRE(m);
  const std::string key = "\n" + name + " ";
  const std::size_t at = m->body.find(key);
  REQUIRE(at != std::string::npos);
  return std::stoull(m->body.substr(at + key.size()));
}

// Each connection is a descriptor here and another in the server (the same process): 2,000 and
// more. The hard limit is what a process may raise its soft limit to.
void allow_open_files(rlim_t n) {
  rlimit r{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &r) == 0);
  if (r.rlim_cur >= n) return;
  if (r.rlim_max < n) {
    MESSAGE("RLIMIT_NOFILE's hard limit is " << r.rlim_max << "; this test needs " << n);
    REQUIRE(r.rlim_max >= n);
  }
  r.rlim_cur = n;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &r) == 0);
}

}  // namespace

TEST_CASE("http: with 1,000 connections stalled halfway through a request and 200 idle, /health answers within 1 s") {
  allow_open_files(4096);
  serve::ServerOptions o;
  Running r(o);
  std::vector<int> stalled;
  for (int i = 0; i < 1000; ++i) {
    stalled.push_back(connect_to(r));
    send_all(stalled.back(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le");  // and nothing more
  }
  for (int i = 0; i < 200; ++i) stalled.push_back(connect_to(r));  // connected, said nothing
  // The server has taken them all (its count is of connections it accepted and holds).
  std::size_t open = 0;
  for (int i = 0; i < 500 && (open = metric_of(r, "brrr_open_connections")) < 1201; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(open >= 1201);
  const auto t0 = Clock::now();
  auto health = r.client().Get("/health");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  REQUIRE(health);
  CHECK(health->status == 200);
  INFO("/health took " << seconds << " s");
  CHECK(seconds < 1.0);
  // And a completion, beside them all.
  auto c = r.client().Post("/v1/completions", R"({"prompt": "ab", "max_tokens": 4})", "application/json");
  REQUIRE(c);
  CHECK(c->status == 200);
  CHECK(json::parse(c->body)["usage"]["completion_tokens"] == 4);
  for (int fd : stalled) ::close(fd);
  for (int i = 0; i < 500 && (open = metric_of(r, "brrr_open_connections")) > 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(open <= 1);  // the hang-ups were seen: only /metrics' own connection is left
}

TEST_CASE("http: headers or a body that do not arrive in time are answered 408, and an idle connection is closed") {
  serve::ServerOptions o;
  o.http.header_timeout_s = 0.3;
  o.http.body_timeout_s = 0.3;
  o.http.idle_timeout_s = 0.3;
  Running r(o);
  bool closed = false;
  SUBCASE("headers") {
    const int fd = connect_to(r);
    send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n");
    const std::string got = read_until_closed(fd, 5, closed);
    ::close(fd);
    CHECK(closed);
    CHECK(got.rfind("HTTP/1.1 408 ", 0) == 0);
    CHECK(got.find("Connection: close") != std::string::npos);
    CHECK(got.find("the request's headers did not arrive within 0.3 s") != std::string::npos);
  }
  SUBCASE("body") {
    const int fd = connect_to(r);
    send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: 40\r\n\r\n{\"prompt\": \"a\",");  // 15 of 40 bytes
    const std::string got = read_until_closed(fd, 5, closed);
    ::close(fd);
    CHECK(closed);
    CHECK(got.rfind("HTTP/1.1 408 ", 0) == 0);
    CHECK(got.find("the request's body did not arrive within 0.3 s") != std::string::npos);
  }
  SUBCASE("a keep-alive connection idle after its answer is closed, with nothing to say") {
    const int fd = connect_to(r);
    send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string got = read_until_closed(fd, 5, closed);
    ::close(fd);
    CHECK(closed);
    CHECK(got.rfind("HTTP/1.1 200 ", 0) == 0);
    CHECK(got.find("HTTP/1.1", 1) == std::string::npos);  // one answer, then the close
  }
  SUBCASE("headers over the limit: 431") {
    const int fd = connect_to(r);
    send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\nX-Long: " + std::string(20000, 'a') + "\r\n\r\n");
    const std::string got = read_until_closed(fd, 5, closed);
    ::close(fd);
    CHECK(got.rfind("HTTP/1.1 431 ", 0) == 0);
    CHECK(got.find("over the limit of 16384 bytes") != std::string::npos);
  }
  // Meanwhile the server answered the others as usual.
  CHECK(r.client().Get("/health")->status == 200);
}

TEST_CASE("http: a stream reader too slow for its stream is dropped and cancelled, and another client is not held up") {
  serve::ServerOptions o;
  o.http.stream_buffer_bytes = 16 << 10;
  o.http.send_buffer_bytes = 4096;  // the kernel's own buffers would hold a megabyte or more first
  o.scheduler.slots = 8;
  Running r(o, true);
  // The slow one: 32 streamed choices of 200 tokens with 5 alternatives each, about 4 MB of
  // events, and it reads none of them. Its first 8 choices take the 8 slots; the rest wait.
  const int slow = connect_to(r, 4096);
  const std::string body = R"({"prompt": "a", "max_tokens": 200, "n": 32, "logprobs": 5, "stream": true, "ignore_eos": true})";
  send_all(slow, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body);
  // Another client streams beside it, and gets all of its completion.
  const auto t0 = Clock::now();
  auto other = r.client().Post("/v1/completions", R"({"prompt": "b", "max_tokens": 30, "stream": true, "ignore_eos": true})",
                               "application/json");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  REQUIRE(other);
  CHECK(other->status == 200);
  CHECK(other->body.find("\"finish_reason\":\"length\"") != std::string::npos);
  CHECK(other->body.find("data: [DONE]") != std::string::npos);
  MESSAGE("the other client's 30 tokens took " << seconds << " s");
  // The slow client's 32 sequences end cancelled, the first 8 well before their 200 tokens: it
  // was dropped once 16 KiB waited behind a write it did not take.
  std::uint64_t cancelled = 0;
  for (int i = 0; i < 500 && (cancelled = metric_of(r, "brrr_requests_cancelled_total")) < 32; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(cancelled == 32);
  CHECK(metric_of(r, "brrr_generated_tokens_total") < 8 * 200 + 30);
  // What it can still read is what was in the buffers when it was dropped, then the close.
  bool closed = false;
  const std::string got = read_until_closed(slow, 10, closed);
  ::close(slow);
  CHECK(closed);
  CHECK(got.rfind("HTTP/1.1 200 ", 0) == 0);
  CHECK(got.find("data: [DONE]") == std::string::npos);
}
