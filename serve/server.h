// serve/server.h: brrr serve's HTTP server: the routes, the API key, the limits, the page.
// Chapter 20 (serving). Read before: serve/scheduler.h, serve/api.h. Read next: the chapter.
//
//   GET  /                     the page (serve/page.html, built into the program)
//   GET  /health               {"status": "ok"}, or 503 {"status": "loading"}
//   GET  /v1/models            the one model
//   POST /v1/completions       OpenAI's completions, streamed (server-sent events) or not; one
//                              prompt or many (each a choice of its own), n completions of each
//   POST /v1/chat/completions  404: a GPT-2 has no chat template (chapter 20 says why)
//   POST /tokenize             {"content": text} -> {"tokens": [ids]} (with_pieces: [{id, piece}])
//   POST /detokenize           {"tokens": [ids]} -> {"content": text}
//   POST /v1/attention         {"tokens": [ids]} -> the last token's attention, every layer and head
//   GET  /metrics              Prometheus text
//
// The HTTP transport is serve/http.h: connections on an event loop (Boost.Beast on Asio), a
// few I/O threads for all of them, so clients that stall or idle cost a socket each, not a
// thread. The handlers parse, check and submit; only the scheduler's thread runs the model,
// and its events reach each client through the connection's stream.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "brrr/models/gpt.h"
#include "brrr/tokenizer/text_tokenizer.h"
#include "serve/http.h"
#include "serve/scheduler.h"

namespace brrr::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (bind() says which)
  SchedulerOptions scheduler;  // slots, queue, the model's threads, the prefill chunk
  std::string api_key;                   // when set, the API needs "Authorization: Bearer KEY"
  // The transport's threads and limits (serve/http.h): a body over http.max_body_bytes is
  // answered 413; time limits on headers and bodies (408), idle keep-alive, a slow stream
  // reader's buffer.
  HttpOptions http;
  std::string model_name = "brrr";
  std::int64_t attention_limit = 200'000'000;  // parameters above which /v1/attention refuses
  DType weights = kFloat32;  // what the steps read: the model's float32 weights, or a bfloat16 copy
  Device device = kCPU;      // where the steps run: the CPU, or Device::cuda() (the DeviceDecoder)
};

// What the loader returns: the model (float32, on the CPU) and its tokenizer.
struct LoadedModel {
  std::shared_ptr<models::GPT> model;
  std::unique_ptr<tokenizer::TextTokenizer> tokenizer;
};

class Server {
 public:
  Server(ServerOptions options, std::function<LoadedModel()> loader);
  ~Server();  // stop()

  // Binds the socket (port 0: a free one) and returns the port; throws when it cannot.
  int bind();
  // Serves on a thread of its own and loads the model on another: until it is loaded the API
  // answers 503. The loader's error is kept (load_error()) and every API call answers 503 with it.
  void start();
  bool ready() const;
  std::string load_error() const;
  // Cancels every request in flight (each ends with finish_reason "cancelled"), closes the
  // socket and joins the threads. Idempotent.
  void stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace brrr::serve
