#include "runtime/cluster_config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>

#include "core/file_io.h"
#include "core/json_nesting.h"

namespace ballot::runtime {
namespace {

using Json = nlohmann::json;

Error config_error(const std::string& why) { return make_error(ErrorCode::kInvalidArgument, "cluster config: " + why); }

// A host as the transport takes it: an IPv4 or IPv6 address, or a DNS name. Caught here, not as a
// node that dials a name that cannot exist for as long as it retries.
Status check_host(const std::string& host, const std::string& where) {
  if (host.empty()) return config_error(where + " is empty");
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    return config_error(where + " '" + host + "': write an IPv6 address without brackets (the port is its own key)");
  }
  if (host.find_first_of("[],") != std::string::npos) {
    return config_error(where + " '" + host +
                        "' is not one host: a Slurm node list? Write one host per entry (`scontrol show "
                        "hostnames \"$SLURM_JOB_NODELIST\"` lists them)");
  }
  const bool valid = host.size() <= 253 && std::all_of(host.begin(), host.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == ':' ||
                              c == '_' || c == '%';
                     });
  if (!valid) return config_error(where + " '" + host + "' is not an IP address or a host name");
  // A colon only belongs to an IPv6 address ("10.0.0.1:29500" is a host and a port).
  if (host.find(':') != std::string::npos) {
    in6_addr address{};
    if (::inet_pton(AF_INET6, host.substr(0, host.find('%')).c_str(), &address) != 1) {
      return config_error(where + " '" + host + "' is not an IPv6 address (a port goes in its own key)");
    }
  }
  return {};
}

Status check_keys(const Json& object, const std::set<std::string>& known, const std::string& where) {
  for (const auto& [key, value] : object.items()) {
    if (known.count(key) == 0) return config_error("unknown key '" + key + "' in " + where);
  }
  return {};
}

// Reads object[key] into `out` when present, with a type check that names the key. Numbers are
// checked, not converted: nlohmann's get<unsigned>() would turn -1 into 2^64 − 1, 2.7 into 2 and
// true into 1.
template <typename T>
Status read(const Json& object, const char* key, T& out) {
  const auto it = object.find(key);
  if (it == object.end()) return {};
  const auto wrong = [&](const char* expected) {
    return config_error("'" + std::string(key) + "' must be " + expected + ", not " +
                        it->dump(-1, ' ', false, Json::error_handler_t::replace));
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return wrong("true or false");
  } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
    if (!it->is_number_unsigned() || it->template get<std::uint64_t>() > std::numeric_limits<T>::max()) {
      return wrong(("a whole number in [0, " + std::to_string(std::numeric_limits<T>::max()) + "]").c_str());
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!it->is_number()) return wrong("a number");
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return wrong("a string");
  }
  try {
    out = it->template get<T>();
  } catch (const Json::exception&) {
    return config_error("'" + std::string(key) + "' has the wrong type");
  }
  return {};
}

Status read_path(const Json& object, const char* key, std::filesystem::path& out) {
  std::string text = out.string();
  BALLOT_TRY(read(object, key, text));
  out = text;
  return {};
}

}  // namespace

Result<ClusterConfig> parse_cluster_config(const std::string& json_text) {
  if (!json_nesting_ok(json_text))
    return config_error("arrays and objects nested deeper than " + std::to_string(kMaxJsonNesting) + " levels");
  // A key given twice in one object is an error (the JSON library keeps the last one: a second
  // "server" would silently replace the first); the parser's callback sees every key, and the
  // error names the object that holds it.
  struct Container {
    bool array = false;
    std::string name;  // "the top level", "'server'", "an element of 'nodes'"
    std::set<std::string> keys;
    std::string last_key;
  };
  std::vector<Container> open;
  std::string duplicate;
  const auto watch = [&](int, Json::parse_event_t event, Json& parsed) {
    using Event = Json::parse_event_t;
    if (event == Event::object_start || event == Event::array_start) {
      std::string name = "the top level";
      if (!open.empty())
        name = open.back().array ? "an element of " + open.back().name : "'" + open.back().last_key + "'";
      open.push_back({event == Event::array_start, std::move(name), {}, {}});
    } else if ((event == Event::object_end || event == Event::array_end) && !open.empty()) {
      open.pop_back();
    } else if (event == Event::key && !open.empty()) {
      Container& object = open.back();
      object.last_key = parsed.get<std::string>();
      if (duplicate.empty() && !object.keys.insert(object.last_key).second) {
        duplicate = "the key '" + object.last_key + "' appears twice in " + object.name;
      }
    }
    return true;
  };
  Json root;
  try {
    root = Json::parse(json_text, watch);
  } catch (const Json::exception& error) {
    // A syntax error says where ("parse error at line 3, column 14: … unexpected '}'"); a number
    // too large for a double (1e999) is an out_of_range error of the parser.
    std::string what = error.what();
    if (const auto end = what.find("] "); what.rfind("[json.exception.", 0) == 0 && end != std::string::npos)
      what = what.substr(end + 2);  // the library's tag, not for users
    return config_error("not valid JSON: " + what);
  }
  if (!duplicate.empty()) return config_error(duplicate);
  if (!root.is_object()) return config_error("the top level must be an object");
  BALLOT_TRY(check_keys(root,
                        {"server", "nodes", "keys", "checkpoint", "checkpoint_every", "node_state", "round_deadline_ms",
                         "relay_decisions", "skip_absent", "metrics", "training"},
                        "the top level"));
  ClusterConfig config;
  if (const auto server = root.find("server"); server != root.end()) {
    if (!server->is_object()) return config_error("'server' must be an object");
    BALLOT_TRY(check_keys(*server, {"host", "port", "io_threads"}, "'server'"));
    BALLOT_TRY(read(*server, "host", config.server_host));
    BALLOT_TRY(check_host(config.server_host, "'server.host'"));
    BALLOT_TRY(read(*server, "port", config.server_port));
    BALLOT_TRY(read(*server, "io_threads", config.server_io_threads));
    if (config.server_io_threads < 1 || config.server_io_threads > 64) {
      return config_error("'server.io_threads' must be in 1..64");
    }
  }
  if (const auto nodes = root.find("nodes"); nodes != root.end()) {
    if (!nodes->is_array()) return config_error("'nodes' must be an array of {host, port}");
    for (const auto& node : *nodes) {
      if (!node.is_object()) return config_error("each entry of 'nodes' must be an object");
      BALLOT_TRY(check_keys(node, {"host", "port"}, "'nodes'"));
      NodeAddress address;
      BALLOT_TRY(read(node, "host", address.host));
      BALLOT_TRY(read(node, "port", address.port));
      if (address.port == 0) return config_error("every entry of 'nodes' needs a port");
      BALLOT_TRY(check_host(address.host, "'nodes[" + std::to_string(config.nodes.size()) + "].host'"));
      config.nodes.push_back(std::move(address));
    }
  }
  BALLOT_TRY(read_path(root, "keys", config.keys));
  BALLOT_TRY(read_path(root, "checkpoint", config.checkpoint));
  BALLOT_TRY(read(root, "checkpoint_every", config.checkpoint_every));
  BALLOT_TRY(read_path(root, "node_state", config.node_state));
  BALLOT_TRY(read(root, "round_deadline_ms", config.round_deadline_ms));
  BALLOT_TRY(read(root, "relay_decisions", config.relay_decisions));
  BALLOT_TRY(read(root, "skip_absent", config.skip_absent));
  BALLOT_TRY(read_path(root, "metrics", config.metrics));
  if (const auto training = root.find("training"); training != root.end()) {
    if (!training->is_object()) return config_error("'training' must be an object");
    BALLOT_TRY(check_keys(*training, {"nodes",
                                      "byzantine",
                                      "code",
                                      "placement",
                                      "model",
                                      "update",
                                      "worker_momentum",
                                      "lr",
                                      "partition_size",
                                      "rounds",
                                      "seed",
                                      "job",
                                      "data",
                                      "eval_every",
                                      "eval_examples",
                                      "attack",
                                      "attackers",
                                      "attacker_choice",
                                      "rule",
                                      "codec",
                                      "digest_every"},
                          "'training'"));
    auto& t = config.training;
    BALLOT_TRY(read(*training, "nodes", t.nodes));
    BALLOT_TRY(read(*training, "byzantine", t.byzantine));
    BALLOT_TRY(read(*training, "code", t.code));
    std::string placement = "replicated";
    BALLOT_TRY(read(*training, "placement", placement));
    auto parsed_placement = parse_placement(placement);
    if (!parsed_placement.ok()) return config_error(parsed_placement.error().message);
    t.placement = *parsed_placement;
    BALLOT_TRY(read(*training, "model", t.model));
    BALLOT_TRY(read(*training, "update", t.update));
    BALLOT_TRY(read(*training, "worker_momentum", t.worker_momentum));
    BALLOT_TRY(read(*training, "lr", t.lr));
    BALLOT_TRY(read(*training, "partition_size", t.partition_size));
    BALLOT_TRY(read(*training, "rounds", t.rounds));
    BALLOT_TRY(read(*training, "seed", t.seed));
    BALLOT_TRY(read(*training, "job", t.job));
    BALLOT_TRY(read(*training, "data", t.data));
    BALLOT_TRY(read(*training, "eval_every", t.eval_every));
    BALLOT_TRY(read(*training, "eval_examples", t.eval_examples));
    BALLOT_TRY(read(*training, "digest_every", t.digest_every));
    BALLOT_TRY(read(*training, "attack", t.attack));
    BALLOT_TRY(read(*training, "attackers", t.attackers));
    BALLOT_TRY(read(*training, "attacker_choice", t.attacker_choice));
    BALLOT_TRY(read(*training, "rule", t.rule));
    BALLOT_TRY(read(*training, "codec", t.codec));
  }
  if (config.server_port == 0) return config_error("server port must be set");
  if (config.round_deadline_ms == 0) return config_error("'round_deadline_ms' must be at least 1");
  if (config.training.placement == Placement::kExchange && config.nodes.size() != config.training.nodes) {
    return config_error("placement 'exchange' needs the address of every node: 'nodes' has " +
                        std::to_string(config.nodes.size()) + " entries, n = " + std::to_string(config.training.nodes));
  }
  if (config.relay_decisions && config.nodes.size() != config.training.nodes) {
    return config_error("'relay_decisions' needs the address of every node: 'nodes' has " +
                        std::to_string(config.nodes.size()) + " entries, n = " + std::to_string(config.training.nodes));
  }
  if (!config.nodes.empty() && config.nodes.size() != config.training.nodes) {
    return config_error("'nodes' has " + std::to_string(config.nodes.size()) +
                        " entries, n = " + std::to_string(config.training.nodes));
  }
  BALLOT_TRY(config.training.validate());
  return config;
}

Status check_required_fields(const std::string& json_text) {
  if (!json_nesting_ok(json_text)) return {};  // parse_cluster_config says what is wrong
  const Json root = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return {};  // parse_cluster_config says what is wrong
  std::vector<std::string> missing;
  const auto server = root.find("server");
  if (server == root.end() || !server->is_object()) {
    missing.push_back("'server' (an object with 'host' and 'port')");
  } else {
    if (!server->contains("host")) missing.push_back("'server.host'");
    if (!server->contains("port")) missing.push_back("'server.port'");
  }
  if (!root.contains("keys")) missing.push_back("'keys' (the key directory: ca.crt, node-<id>.crt, this node's key)");
  if (!root.contains("training")) missing.push_back("'training'");
  if (missing.empty()) return {};
  std::string list;
  for (const auto& field : missing) list += (list.empty() ? "" : ", ") + field;
  return config_error("missing required field" + std::string(missing.size() > 1 ? "s " : " ") + list);
}

Result<ClusterConfig> load_cluster_config(const std::filesystem::path& file, ConfigUse use) {
  // A directory, a device or a huge file is an error naming it, not "not valid JSON" or a read
  // without end.
  BALLOT_ASSIGN_OR_RETURN(const auto bytes, read_file(file, kMaxClusterConfigBytes, "cluster config"));
  const std::string text(bytes.begin(), bytes.end());
  if (use == ConfigUse::kRole) {
    if (auto required = check_required_fields(text); !required.ok()) {
      auto error = std::move(required).error();
      error.message += " (" + file.string() + ")";
      return error;
    }
  }
  auto config = parse_cluster_config(text);
  if (!config.ok()) {
    auto error = std::move(config).error();
    error.message += " (" + file.string() + ")";
    return error;
  }
  return config;
}

std::string to_json(const ClusterConfig& config) {
  const auto& t = config.training;
  Json root = {
      {"server",
       {{"host", config.server_host}, {"port", config.server_port}, {"io_threads", config.server_io_threads}}},
      {"keys", config.keys.string()},
      {"checkpoint", config.checkpoint.string()},
      {"checkpoint_every", config.checkpoint_every},
      {"node_state", config.node_state.string()},
      {"round_deadline_ms", config.round_deadline_ms},
      {"relay_decisions", config.relay_decisions},
      {"skip_absent", config.skip_absent},
      {"metrics", config.metrics.string()},
      {"training",
       {{"nodes", t.nodes},
        {"byzantine", t.byzantine},
        {"code", t.code},
        {"placement", std::string(placement_name(t.placement))},
        {"model", t.model},
        {"update", t.update},
        {"worker_momentum", t.worker_momentum},
        {"lr", t.lr},
        {"partition_size", t.partition_size},
        {"rounds", t.rounds},
        {"seed", t.seed},
        {"job", t.job},
        {"data", t.data},
        {"eval_every", t.eval_every},
        {"eval_examples", t.eval_examples},
        {"digest_every", t.digest_every},
        {"attack", t.attack},
        {"attackers", t.attackers},
        {"attacker_choice", t.attacker_choice},
        {"rule", t.rule},
        {"codec", t.codec}}},
  };
  if (!config.nodes.empty()) {
    Json nodes = Json::array();
    for (const auto& node : config.nodes) nodes.push_back({{"host", node.host}, {"port", node.port}});
    root["nodes"] = std::move(nodes);
  }
  // Option strings may hold bytes that are not UTF-8: replace them rather than throw.
  return root.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

Status save_cluster_config(const std::filesystem::path& file, const ClusterConfig& config) {
  const std::string text = to_json(config);
  const Status written =
      write_file_atomically(file, std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()), 0644);
  if (!written.ok()) return make_error(ErrorCode::kIo, "cannot write cluster config: " + written.error().message);
  return {};
}

}  // namespace ballot::runtime
