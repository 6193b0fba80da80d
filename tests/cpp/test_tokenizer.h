// A tokenizer for C++ tests that need one without a vocabulary file.
#pragma once

#include <memory>

#include "stoker/text/tokenizer.h"

namespace stoker::testing {

// A byte-level tokenizer with no merges and the Qwen chat/vision tokens at their Qwen
// ids (<|im_start|> 151644, <|im_end|> 151645, <|vision_start|> 151652,
// <|vision_end|> 151653, <|image_pad|> 151655, <think> 151667, </think> 151668): every
// byte of plain text is one token, which makes labels easy to read.
std::shared_ptr<const text::Tokenizer> ByteChatTokenizer();

}  // namespace stoker::testing
