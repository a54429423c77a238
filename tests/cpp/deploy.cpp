// A program with no Python in it that runs a model using blosa's ops, the way a C++ deployment
// does: it loads blosa's extension library (whose static initializers register the ops with
// torch's dispatcher; nothing in it needs Python until Python imports it), then a TorchScript
// module or an AOTInductor package, and runs it on inputs drawn from torch's CPU generator
// after manual_seed(0), which Python's torch.manual_seed(0) and torch.randn reproduce.
//
// Usage: deploy LIBRARY jit|aoti MODEL B n d LENGTH... (one length a row)
// Prints the sentence vectors [B, D], one value a line.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/script.h>
#include <torch/torch.h>

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s LIBRARY jit|aoti MODEL B n d LENGTH...\n", argv[0]);
    return 2;
  }
  // Lazy binding: the library's one Python function (its module's PyInit) is never called here.
  if (dlopen(argv[1], RTLD_LAZY | RTLD_GLOBAL) == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  const std::string form = argv[2], model = argv[3];
  const int64_t B = std::atoll(argv[4]), n = std::atoll(argv[5]), d = std::atoll(argv[6]);
  std::vector<int64_t> lengths;
  for (int i = 7; i < argc; ++i) lengths.push_back(std::atoll(argv[i]));

  torch::manual_seed(0);
  const torch::Tensor x = torch::randn({B, n, d}, torch::kFloat64);
  const torch::Tensor mask = torch::arange(n).lt(torch::tensor(lengths).unsqueeze(1));  // [B, n]
  torch::Tensor sentence;
  if (form == "jit") {
    torch::jit::Module module = torch::jit::load(model);
    sentence = module.forward({x, mask}).toTuple()->elements()[1].toTensor();
  } else {
    torch::inductor::AOTIModelPackageLoader loader(model);
    sentence = loader.run({x, mask})[1];
  }
  sentence = sentence.contiguous();
  const double* values = sentence.data_ptr<double>();
  for (int64_t i = 0; i < sentence.numel(); ++i) std::printf("%.17g\n", values[i]);
  return 0;
}
