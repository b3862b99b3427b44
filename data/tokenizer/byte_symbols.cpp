#include "data/tokenizer/byte_symbols.h"

#include "data/tokenizer/utf8.h"

namespace dpt::tokenizer {

namespace {

bool stands_for_itself(unsigned b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

std::array<char32_t, 256> make_symbols() {
  std::array<char32_t, 256> s{};
  char32_t next = 0x100;  // the others are numbered from U+0100 in byte order
  for (unsigned b = 0; b < 256; ++b) s[b] = stands_for_itself(b) ? char32_t(b) : next++;
  return s;
}

}  // namespace

const std::array<char32_t, 256>& byte_symbols() {
  static const std::array<char32_t, 256> symbols = make_symbols();
  return symbols;
}

std::optional<uint8_t> symbol_byte(char32_t symbol) {
  // Every symbol is below U+0144 (256 + 68); a table of that size inverts the map.
  static const std::array<int16_t, 0x144> inverse = [] {
    std::array<int16_t, 0x144> inv;
    inv.fill(-1);
    for (unsigned b = 0; b < 256; ++b) inv[byte_symbols()[b]] = int16_t(b);
    return inv;
  }();
  if (symbol >= inverse.size() || inverse[symbol] < 0) return std::nullopt;
  return uint8_t(inverse[symbol]);
}

std::optional<std::string> symbols_to_bytes(std::string_view symbols, char32_t* bad) {
  std::string out;
  out.reserve(symbols.size());
  size_t pos = 0;
  while (pos < symbols.size()) {
    const std::optional<char32_t> cp = decode_code_point(symbols, pos);
    const std::optional<uint8_t> b = cp ? symbol_byte(*cp) : std::nullopt;
    if (!b) {
      if (bad) *bad = cp ? *cp : kReplacementChar;
      return std::nullopt;
    }
    out.push_back(char(*b));
  }
  return out;
}

std::string bytes_to_symbols(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) append_utf8(byte_symbols()[b], out);
  return out;
}

}  // namespace dpt::tokenizer
