#pragma once
// GPT-2's byte-to-unicode map. Terms: a *byte symbol* is the printable code point GPT-2
// writes in place of one byte in its vocabulary files, so that every token is a string of
// visible characters. Bytes that are printable Latin-1 already ('!'..'~', U+00A1..U+00AC,
// U+00AE..U+00FF) stand for themselves; the other 68 (controls, space, DEL, U+0080..U+00A0,
// the soft hyphen U+00AD) take U+0100, U+0101, ... in byte order. So the space byte is
// U+0120 'Ġ' and the newline U+010A 'Ċ'.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dpt::tokenizer {

// The symbol of each byte value.
const std::array<char32_t, 256>& byte_symbols();

// The byte a symbol stands for, or nothing if `symbol` is not one of the 256.
std::optional<uint8_t> symbol_byte(char32_t symbol);

// A vocabulary file's token text (UTF-8 of byte symbols) to the bytes it stands for, and
// back. symbols_to_bytes returns nothing on invalid UTF-8 or a code point that is not a
// byte symbol, and puts that code point (or 0xFFFD for bad UTF-8) in *bad.
std::optional<std::string> symbols_to_bytes(std::string_view symbols, char32_t* bad = nullptr);
std::string bytes_to_symbols(std::string_view bytes);

}  // namespace dpt::tokenizer
