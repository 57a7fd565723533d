// The on-disk kernel cache: <dir>/kernels/<key>/{kernel.cc, kernel.so}; the runtime headers kernels
// include live in <dir>/include/<hash of their text>/. Entries are built in a private temporary folder
// and renamed into place, so concurrent processes never see half-written libraries.
#pragma once

#include <functional>
#include <string>

namespace tessera::tl {

// $TESSERA_TL_CACHE, else $XDG_CACHE_HOME/tessera/tl, else $HOME/.cache/tessera/tl (created).
std::string default_kernel_cache_dir();
// A 128-bit hash of data as 32 hex digits (two independent 64-bit FNV-1a streams).
std::string hash_hex(const std::string& data);
// The include root holding the embedded runtime headers under `dir` (written on first use).
std::string runtime_include_dir(const std::string& dir);
// A hash of the embedded runtime headers' text (part of every cache key).
const std::string& runtime_headers_hash();

// The library for `key` under dir: returned as is when present (*hit = true); else built by
// build(source_path, library_path) in a temporary folder next to it and renamed into place.
std::string cached_library(const std::string& dir, const std::string& key, const std::string& source,
                           const std::function<void(const std::string&, const std::string&)>& build, bool* hit);

// Creates dir and its parents; throws Error(kRuntime) when it cannot.
void make_dirs(const std::string& dir);
// Writes text to path (replacing it); throws Error(kRuntime) on failure.
void write_file(const std::string& path, const std::string& text);
// Removes a folder and everything in it (best effort).
void remove_tree(const std::string& dir);

}  // namespace tessera::tl
