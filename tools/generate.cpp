// generate: text from a GPT-2 checkpoint.
//   build/bin/generate --init-from D/model.safetensors --tokenizer third_party/gpt2 --prompt "Hello"
//                      [--max-tokens N --temperature T --top-k K --seed S --ids]
// The checkpoint is any file --init-from reads (models/io/gpt2_weights.h: train's
// checkpoints, Hugging Face's GPT2LMHeadModel or GPT2Model files); the shape comes from
// the file, the heads from the config.json beside it (or --heads). The prompt is encoded
// with GPT-2's tokenizer (an empty prompt starts from <|endoftext|>), continued by
// models/zoo/generate.h (greedy with --temperature 0 or --top-k 1; otherwise sampled, the
// same text for the same --seed), and printed decoded: prompt and continuation. --ids
// prints the token ids instead (prompt, then a '|', then the continuation).
#include <boost/program_options.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "data/tokenizer/tokenizer.h"
#include "models/zoo/generate.h"
#include "models/zoo/gpt2.h"
#include "models/zoo/models.h"
#include "api/cli/cli.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  std::string init_from, tokenizer_dir = dpt::tokenizer::default_tokenizer_dir(), prompt;
  int64_t max_tokens = 50, top_k = 0, heads = 0;
  float temperature = 1.0f;
  uint64_t seed = 0;
  bool ids = false;
  dpt::tools::Cli cli("generate", "generate: text from a GPT-2 checkpoint");
  cli.flags().add_options()
    ("init-from", po::value(&init_from), "the checkpoint: model.safetensors of train, or a Hugging Face GPT-2 file (required)")
    ("tokenizer", po::value(&tokenizer_dir)->default_value(tokenizer_dir), "directory of vocab.json + merges.txt or encoder.json + vocab.bpe")
    ("prompt", po::value(&prompt)->default_value(""), "text to continue (empty: start from <|endoftext|>)")
    ("max-tokens", po::value(&max_tokens)->default_value(50), "tokens to add")
    ("temperature", po::value(&temperature)->default_value(1.0f), "softmax temperature; 0: greedy")
    ("top-k", po::value(&top_k)->default_value(0), "sample among the K most likely tokens (0: all; 1: greedy)")
    ("seed", po::value(&seed)->default_value(0), "sampling seed")
    ("heads", po::value(&heads)->default_value(0), "attention heads (default: config.json beside the file, else GPT-2's for its width)")
    ("ids", po::bool_switch(&ids), "print token ids, not text");
  const auto rc = cli.parse(argc, argv, [&](const po::variables_map&) {
    if (init_from.empty()) throw std::invalid_argument("--init-from FILE is required (a model.safetensors)");
    if (!std::filesystem::is_regular_file(init_from))
      throw std::invalid_argument("--init-from '" + init_from + "': no such file");
    if (max_tokens < 0) throw std::invalid_argument("--max-tokens must be >= 0, got " + std::to_string(max_tokens));
    if (top_k < 0) throw std::invalid_argument("--top-k must be >= 0, got " + std::to_string(top_k));
    if (!(temperature >= 0)) throw std::invalid_argument("--temperature must be >= 0");
    if (heads < 0) throw std::invalid_argument("--heads must be >= 0");
  });
  if (rc) return *rc;
  try {
    dpt::tokenizer::Gpt2Tokenizer tok(tokenizer_dir);
    dpt::ModelConfig cfg;
    dpt::Gpt2Request r;
    r.init_from = init_from;
    if (heads > 0) r.heads = heads;
    dpt::configure_gpt2(r, cfg);
    cfg.seq_len = cfg.n_positions;  // the context window
    cfg.dropout = 0;
    auto model = dpt::make_model("gpt2", cfg);  // loads the file (errors name the tensor)
    std::vector<int32_t> context = tok.encode(prompt);
    if (context.empty()) context.push_back(int32_t(std::min<int64_t>(50256, cfg.vocab - 1)));  // <|endoftext|>
    for (const int32_t id : context)
      if (id >= cfg.vocab)
        throw std::invalid_argument("the prompt's token " + std::to_string(id) + " is outside the model's vocabulary of " +
                                    std::to_string(cfg.vocab) + " (another tokenizer?)");
    const size_t prompt_len = context.size();
    const auto out = dpt::generate_tokens(*model, context, cfg.n_positions, max_tokens, temperature, seed, top_k);
    if (ids) {
      for (size_t i = 0; i < out.size(); ++i)
        std::printf("%s%d", i == 0 ? "" : (i == prompt_len ? " | " : " "), out[i]);
      std::printf("%s\n", out.size() == prompt_len ? " |" : "");
    } else {
      std::printf("%s\n", tok.decode(out).c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "generate: " << e.what() << "\n";
    return 1;
  }
}
