// Placeholder so the tokenizer library has a source until tokenizer/src fills in.
namespace brrr::tokenizer {
int placeholder = 0;
}
