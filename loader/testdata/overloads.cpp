// Symbols for the loader's tests: overloads, a namespace, a method returning a
// vector (hidden return slot), an endbr64 entry under -fcf-protection.
#include <vector>

namespace engine {
struct Sampler {
	std::vector<int> accept(const std::vector<int> &draft, bool first);
};

__attribute__((noinline)) std::vector<int> Sampler::accept(const std::vector<int> &draft, bool first)
{
	std::vector<int> out(draft.begin(), draft.end());
	if (first)
		out.push_back(1);
	return out;
}

__attribute__((noinline)) int verify(int n) { return n + 1; }
__attribute__((noinline)) int verify(int n, int m) { return n + m; }
__attribute__((noinline)) int draft_tokens(int n) { return n * 2; }
} // namespace engine

int main(int argc, char **)
{
	engine::Sampler s;
	std::vector<int> d(argc, 1);
	return (int)s.accept(d, true).size() + engine::verify(argc) + engine::verify(argc, 2) + engine::draft_tokens(argc);
}
