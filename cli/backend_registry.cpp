// The backend registry (see backend_registry.h).
#include "cli/backend_registry.h"

#include <cstdlib>
#include <stdexcept>

#include "cli/device_option.h"
#include "fuzz/alt_reference.h"
#include "plugin/hosted_plugin.h"
#include "plugin/plugin_backend.h"
#include "reference/reference_backend.h"
#ifdef SSMCHECK_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace ssm::cli {

namespace {

constexpr const char* kPluginPrefix = "plugin:";
constexpr const char* kInProcessPrefix = "plugin-in-process:";  // debugging: the plug-in in ssmcheck's process

fuzz::BackendFactory reference_factory() {
  return [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); };
}

fuzz::BackendEntry reference_entry() {
  fuzz::BackendEntry e;
  e.name = e.flag = "reference";
  e.summary = "ssmcheck's CPU reference (campaigns check its alternate path)";
  e.make = reference_factory();
  e.under_test = [] { return std::unique_ptr<Backend>(new fuzz::alt::AltReferenceBackend()); };
  e.alternate_path = true;
  e.model = reference_factory();
  e.strictness = cmp::Strictness::bitwise;
  e.caps = Capabilities::everything();
  e.caps.async_copies = false;  // no async path
  return e;
}

bool g_cuda_probed = false;  // cuda_probed()

// "" when the CUDA backend can run here, else why not. Starts the CUDA runtime: never before the
// command line is parsed (--device must narrow CUDA_VISIBLE_DEVICES first).
std::string cuda_unavailable() {
  g_cuda_probed = true;
#ifdef SSMCHECK_HAVE_CUDA
  std::string why;
  if (cuda::device_available(&why)) return "";
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"))  // --device narrows it: say what is visible
    why += std::string(" with CUDA_VISIBLE_DEVICES='") + v + "'";
  return why;
#else
  return "this build has no CUDA implementation";
#endif
}

fuzz::BackendEntry cuda_entry() {
  fuzz::BackendEntry e;
  e.name = e.flag = "cuda";
  e.summary = "ssmcheck's CUDA implementation";
#ifdef SSMCHECK_HAVE_CUDA
  e.make = [] { return std::unique_ptr<Backend>(new cuda::CudaBackend()); };
#else
  e.make = []() -> std::unique_ptr<Backend> { throw std::invalid_argument("backend 'cuda': " + cuda_unavailable()); };
#endif
  e.under_test = e.make;
  e.model = reference_factory();
  e.caps = Capabilities::everything();
  e.caps.norm_groups = false;     // its Mamba-2 output kernel normalises by ng groups
  e.caps.other_numerics = false;  // its kernels compute the contract's numerics (Engine::create_pool)
  e.perturbable = true;           // cuda/schedule.h
  return e;
}

// flag: the whole --backend text; text: what names the plug-in (after "plugin:", or all of it
// for a registered in-process one).
fuzz::BackendEntry plugin_entry(const std::string& flag, const std::string& text, bool in_process = false) {
  plugin::PluginSpec spec;
  const plugin::PluginLibrary* lib = nullptr;
  try {
    spec = plugin::PluginSpec::parse(text);
    spec.in_process = in_process;
    lib = in_process ? &plugin::load_plugin_in_process(spec.path) : &plugin::load_plugin(spec.path);
  } catch (const std::exception& e) {
    throw std::invalid_argument("backend '" + flag + "': " + e.what());
  }
  fuzz::BackendEntry e;
  e.name = spec.label();
  e.flag = flag;
  e.summary = (lib->in_process ? "in-process plug-in " : "plug-in (in its host process) ") + lib->path + ": " +
              lib->declared();
  e.make = [spec] { return std::unique_ptr<Backend>(new plugin::PluginBackend(spec)); };
  e.under_test = e.make;
  e.python_class = flag.rfind(plugin::kPythonScheme, 0) == 0;
  e.model = reference_factory();
  e.strictness = lib->bitwise() ? cmp::Strictness::bitwise : cmp::Strictness::classes;
  e.numerics = lib->numerics();
  e.caps = lib->capabilities();        // SSMP_MAMBA2, SSMP_PLE, ssmp_capabilities, pause_async_copies
  e.perturbable = lib->perturbable();  // perturb_schedule
  e.caps.norm_groups = false;          // ssmp_config.mamba2 passes no norm groups: the plug-in normalises by ng
  // a plug-in is created now once, so that a create that fails (a bad option) is an error before any work
  try {
    e.make();
  } catch (const std::exception& ex) {
    throw std::invalid_argument("backend '" + flag + "': " + ex.what());
  }
  return e;
}

}  // namespace

std::vector<std::pair<fuzz::BackendEntry, std::string>> builtin_backends() {
  return {{reference_entry(), ""}, {cuda_entry(), cuda_unavailable()}};
}

bool cuda_probed() { return g_cuda_probed; }

fuzz::BackendEntry find_backend(const std::string& name) {
  if (name.rfind(fuzz::kPerturbedPrefix, 0) == 0) {
    const fuzz::BackendEntry base = find_backend(name.substr(std::char_traits<char>::length(fuzz::kPerturbedPrefix)));
    if (!base.perturbable) throw std::invalid_argument(fuzz::no_perturbed_schedule(name, base.name));
    return fuzz::perturbed_entry(base);
  }
  if (name.rfind(kPluginPrefix, 0) == 0)
    return plugin_entry(name, name.substr(std::char_traits<char>::length(kPluginPrefix)));
  if (name.rfind(kInProcessPrefix, 0) == 0)
    return plugin_entry(name, name.substr(std::char_traits<char>::length(kInProcessPrefix)), true);
  const std::string head = name.substr(0, name.find(','));
  if (head.rfind(plugin::kPythonScheme, 0) == 0 && !plugin::is_registered(head)) {
    try {  // a Python class served by its host process (python/ssmcheck/host.py)
      plugin::register_plugin(head, plugin::hosted_plugin_table(plugin::python_launch(head)), true);
    } catch (const std::exception& e) {
      throw std::invalid_argument("backend '" + name + "': " + e.what());
    }
  }
  if (plugin::is_registered(head)) return plugin_entry(name, name);
  for (auto& [entry, why] : builtin_backends()) {
    if (entry.name != name) continue;
    if (!why.empty()) throw BackendUnavailable("backend '" + name + "': " + why);
    return entry;
  }
  throw std::invalid_argument("unknown backend '" + name + "' (expected " + backend_choices() + ")");
}

std::vector<fuzz::BackendEntry> select_backends(const std::string& which,
                                                std::vector<std::pair<std::string, std::string>>* skipped) {
  if (which != "all") return {find_backend(which)};
  std::vector<fuzz::BackendEntry> v;
  for (auto& [entry, why] : builtin_backends()) {
    // a GPU named with --device is asked for: its absence is an error, not a skipped backend
    if (!why.empty() && entry.name == "cuda" && device_requested() >= 0)
      throw BackendUnavailable("--device " + std::to_string(device_requested()) + ": backend 'cuda': " + why);
    if (why.empty()) v.push_back(entry);
    else if (skipped) skipped->emplace_back(entry.name, why);
  }
  return v;
}

Numerics declared_numerics(const std::string& name) {
  const bool external = name.rfind(kPluginPrefix, 0) == 0 || name.rfind(kInProcessPrefix, 0) == 0 ||
                        name.rfind(plugin::kPythonScheme, 0) == 0;
  return external ? find_backend(name).numerics : Numerics{};
}

std::unique_ptr<Backend> make_backend(const std::string& name) { return find_backend(name).make(); }

std::string backend_choices() {
  std::string s;
  for (const fuzz::BackendEntry& b : {reference_entry(), cuda_entry()}) s += b.name + ", ";  // no device probe
  return s + "plugin:PATH.so[,key=value...], python:NAME (through python/ssmcheck) or perturbed:NAME";
}

}  // namespace ssm::cli
