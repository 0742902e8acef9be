// apps/brrr/cli_serve.cpp: `brrr serve`, the model behind an OpenAI-style API and a page (chapter 20).
// Read before: serve/server.h. The model comes from train/model_source.h, as for brrr sample.
// Built without Boost.Beast (BRRR_SERVE, CMakeLists.txt), `brrr serve` says what is missing.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "brrr/error.h"
#include "brrr/parallel.h"
#include "commands.h"
#ifdef BRRR_HAVE_SERVE
#include "serve/server.h"
#include "train/model_source.h"
#include "train/trainer.h"
#endif

namespace brrr::cli {

#ifndef BRRR_HAVE_SERVE
void add_serve_commands(CLI::App& app) {
  CLI::App* serve = app.add_subcommand("serve", "Serve a model (not in this build: it needs Boost.Beast)");
  serve->allow_extras();
  serve->callback([] {
    throw Error("brrr serve: this brrr was built without Boost.Beast (Debian: apt-get install libboost-dev, "
                "then configure again)");
  });
}
#else

namespace {
// Set by SIGINT and SIGTERM; the main thread polls it (a signal handler may do nothing else).
volatile std::sig_atomic_t stop_requested = 0;
extern "C" void on_stop_signal(int) { stop_requested = 1; }

std::string basename_of(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}
}  // namespace

void add_serve_commands(CLI::App& app) {
  struct ServeArgs {
    std::string checkpoint = "out", tokenizer, dtype = "float32", device = "cpu";
    serve::ServerOptions options;
  };
  auto a = std::make_shared<ServeArgs>();
  CLI::App* serve = app.add_subcommand(
      "serve", "Serve a model: an OpenAI-compatible API (/v1/completions) and a page to try it in a browser");
  serve->add_option("--checkpoint", a->checkpoint, "A checkpoint file, a training --out_dir (its newest checkpoint), "
                    "or a Hugging Face GPT-2 folder (config.json, model.safetensors, tokenizer.json)")->capture_default_str();
  serve->add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: the one saved beside the checkpoint, or the folder's)");
  serve->add_option("--host", a->options.host, "Address to listen on (another than 127.0.0.1 opens the server to the network)")->capture_default_str();
  serve->add_option("--port", a->options.port, "Port to listen on (0: any free port)")->check(CLI::Range(0, 65535))->capture_default_str();
  serve->add_option("--slots", a->options.scheduler.slots, "Sequences generated at once (continuous batching), each with its own KV cache")
      ->check(CLI::Range(1, 256))->capture_default_str();
  serve->add_option("--queue", a->options.scheduler.queue, "Sequences that may wait for a slot (one per prompt and n); "
                    "a request that finds this many waiting is answered 429")
      ->check(CLI::Range(0, 4096))->capture_default_str();
  serve->add_option("--prefill-chunk", a->options.scheduler.prefill_chunk,
                    "Prompt tokens a request feeds the model per step, beside the others' decoding (0: the whole prompt at once)")
      ->check(CLI::Range(0, 1 << 20))->capture_default_str();
  serve->add_option("--threads", a->options.scheduler.threads, "CPU threads of the model's steps (0: all)")->check(CLI::NonNegativeNumber)->capture_default_str();
  serve->add_option("--api-key", a->options.api_key, "Require Authorization: Bearer KEY on every API call");
  serve::HttpOptions& http = a->options.http;
  serve->add_option("--io-threads", http.io_threads, "Threads of the HTTP event loop (every connection shares them)")
      ->check(CLI::Range(1, 64))->capture_default_str();
  serve->add_option("--header-timeout", http.header_timeout_s, "Seconds from a request's first byte to its headers' end (then 408)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  serve->add_option("--body-timeout", http.body_timeout_s, "Seconds from a request's headers to its body's end (then 408)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  serve->add_option("--idle-timeout", http.idle_timeout_s, "Seconds a keep-alive connection may wait for its next request")
      ->check(CLI::PositiveNumber)->capture_default_str();
  serve->add_option("--stream-buffer", http.stream_buffer_bytes, "Bytes of a stream a slow client may leave unread "
                    "before it is dropped and its request cancelled")
      ->check(CLI::Range(std::size_t{4096}, std::size_t{1} << 30))->capture_default_str();
  serve->add_option("--dtype", a->dtype, "The weights the steps read: float32, or bf16 (rounded to bfloat16 once, half "
                    "the bytes per step; products and sums in float32; BRRR_AMX=1 puts them on AMX's tile unit where "
                    "the CPU has one)")
      ->check(CLI::IsMember({"float32", "bf16"}))
      ->capture_default_str();
  serve->add_option("--device", a->device, "cpu, cuda (the steps as CUDA kernels, each slot's KV cache in device "
                    "memory: the DeviceDecoder, chapter 20), emulator (those kernels on the CPU, slowly) or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "emulator", "auto"}))
      ->capture_default_str();
  serve->callback([a] {
    a->options.weights = a->dtype == "bf16" ? kBFloat16 : kFloat32;
    a->options.device = train::resolve_device(a->device);
    a->options.model_name = basename_of(a->checkpoint);
    const std::string checkpoint = a->checkpoint, tokenizer = a->tokenizer;
    serve::Server server(a->options, [checkpoint, tokenizer] {
      train::ModelSource source = train::open_model_and_tokenizer(checkpoint, tokenizer);
      source.model->eval();
      return serve::LoadedModel{source.model, std::move(source.tokenizer)};
    });
    const int port = server.bind();
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    server.start();
    std::printf("brrr serve: loading %s; open http://%s:%d/ (the API: http://%s:%d/v1)\n", checkpoint.c_str(),
                a->options.host.c_str(), port, a->options.host.c_str(), port);
    bool said_ready = false;
    while (!stop_requested) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (!said_ready && server.ready()) {
        std::printf("brrr serve: ready (%d slots); Ctrl-C stops\n", a->options.scheduler.slots);
        said_ready = true;
      }
    }
    std::printf("brrr serve: stopping (requests in flight end as \"cancelled\")\n");
    server.stop();
    std::printf("brrr serve: stopped\n");
  });
}
#endif

}  // namespace brrr::cli
