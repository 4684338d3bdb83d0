#include "runtime/cluster_config.h"

#include <gtest/gtest.h>

namespace ballot::runtime {
namespace {

TEST(ClusterConfig, ParsesAndRoundTrips) {
  auto config = parse_cluster_config(R"({
    "server": {"host": "10.0.0.1", "port": 29501, "io_threads": 2},
    "keys": "/etc/ballot/keys", "checkpoint_every": 20, "round_deadline_ms": 900,
    "training": {"nodes": 9, "byzantine": 2, "code": "bernoulli:r=2", "rounds": 50,
                 "attack": "random", "attackers": 2, "placement": "replicated"}
  })");
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->server_host, "10.0.0.1");
  EXPECT_EQ(config->server_port, 29501);
  EXPECT_EQ(config->server_io_threads, 2u);
  EXPECT_EQ(config->training.nodes, 9u);
  EXPECT_EQ(config->training.code, "bernoulli:r=2");
  EXPECT_EQ(config->training.attackers, 2u);
  EXPECT_EQ(config->checkpoint_every, 20u);
  EXPECT_EQ(config->training.model, TrainingOptions{}.model);  // defaults fill the rest
  EXPECT_TRUE(config->skip_absent);

  auto again = parse_cluster_config(to_json(*config));
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(to_json(*again), to_json(*config));

  auto every_round = parse_cluster_config(R"({"skip_absent": false})");
  ASSERT_TRUE(every_round.ok()) << every_round.error().to_string();
  EXPECT_FALSE(every_round->skip_absent);
  EXPECT_FALSE(parse_cluster_config(to_json(*every_round))->skip_absent);

  // Host names and IPv6 addresses (with a zone) are hosts.
  for (const char* host : {"localhost", "node01.cluster.example", "fe80::1%eth0", "::1"}) {
    const auto named = parse_cluster_config(std::string(R"({"server": {"host": ")") + host + R"("}})");
    ASSERT_TRUE(named.ok()) << host << ": " << named.error().to_string();
    EXPECT_EQ(named->server_host, host);
  }
}

TEST(ClusterConfig, ErrorsNameTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {"not json", "not valid JSON"},
      {"{\"server\": {\"port\": 1,}}", "line 1, column 23"},  // where the parser stopped
      {R"({"server": {"port": 29501}, "server": {"port": 29502}})", "the key 'server' appears twice in the top level"},
      {R"({"training": {"nodes": 5, "nodes": 7}})", "the key 'nodes' appears twice in 'training'"},
      {R"({"nodes": [{"host": "a", "port": 1}, {"host": "b", "host": "c", "port": 2}]})",
       "the key 'host' appears twice in an element of 'nodes'"},
      {"[1, 2]", "must be an object"},
      {R"({"sever": {}})", "unknown key 'sever'"},
      {R"({"training": {"nodse": 3}})", "unknown key 'nodse'"},
      {R"({"training": {"nodes": "seven"}})", "'nodes' must be a whole number"},
      // Numbers are checked, not converted (-1 would become 2^64 − 1 rounds, 2.7 would be 2).
      {R"({"training": {"rounds": -1}})", "'rounds' must be a whole number"},
      {R"({"training": {"partition_size": 2.7}})", "'partition_size' must be a whole number"},
      {R"({"training": {"nodes": true}})", "'nodes' must be a whole number"},
      {R"({"server": {"port": 70000}})", "'port' must be a whole number in [0, 65535]"},
      {R"({"training": {"lr": 0.1}})", "'lr' must be a string"},
      {R"({"training": {"worker_momentum": "high"}})", "'worker_momentum' must be a number"},
      {R"({"training": {"nodes": 4, "byzantine": 2}})", "b < n/2"},
      {R"({"training": {"placement": "diagonal"}})", "placement"},
      {R"({"server": {"port": 0}})", "port"},
      {R"({"server": {"io_threads": 0}})", "'server.io_threads' must be in 1..64"},
      {R"({"skip_absent": 1})", "'skip_absent' must be"},
      {R"({"training": {"attack": "meteor"}})", "unknown attack 'meteor'"},
      // Hosts: caught when the file is read, not as a node dialling a name forever.
      {R"({"server": {"host": ""}})", "'server.host' is empty"},
      {R"({"server": {"host": "node[01-04]"}})", "a Slurm node list?"},
      {R"({"server": {"host": "[::1]"}})", "without brackets"},
      {R"({"server": {"host": "10.0.0.1:29500"}})", "is not an IPv6 address (a port goes in its own key)"},
      {R"({"server": {"port": 1e999}})", "not valid JSON: number overflow"},
      {R"({"nodes": [{"host": "10.0.0.1", "port": 1}, {"host": "a b", "port": 2}]})",
       "'nodes[1].host' 'a b' is not an IP address or a host name"},
  };
  for (const auto& [text, expected] : cases) {
    auto config = parse_cluster_config(text);
    ASSERT_FALSE(config.ok()) << text;
    EXPECT_NE(config.error().message.find(expected), std::string::npos) << config.error().message;
  }
}

// A value nested 200,000 levels deep (400 KB, under the file limit) is refused before parsing:
// printing it into the type error recursed once per level and overflowed the stack.
TEST(ClusterConfig, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(200'000, '[') + "1" + std::string(200'000, ']');
  for (const std::string& text :
       {R"({"server": {"host": "h", "port": )" + deep + "}}", R"({"training": )" + deep + "}"}) {
    auto config = parse_cluster_config(text);
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.error().message.find("nested deeper than 64"), std::string::npos) << config.error().message;
    EXPECT_TRUE(check_required_fields(text).ok());  // parse_cluster_config is the one that says why
  }
  const std::string shallow = std::string(60, '[') + "1" + std::string(60, ']');
  auto config = parse_cluster_config(R"({"server": {"port": )" + shallow + "}}");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.error().message.find("'port'"), std::string::npos) << config.error().message;
}

// Option strings come from the command line and may hold bytes that are not UTF-8: writing the
// config (or the evaluation's results.json built from it) replaces them instead of throwing.
TEST(ClusterConfig, InvalidUtf8IsReplacedNotThrown) {
  ClusterConfig config;
  config.training.data = "synthetic\xff\xfe";
  std::string text;
  EXPECT_NO_THROW(text = to_json(config));
  EXPECT_NE(text.find("synthetic"), std::string::npos);
}

// Exchange placement: nodes send each other their partition signs, so each needs an address.
TEST(ClusterConfig, ExchangePlacementNeedsEveryNodeAddress) {
  auto config = parse_cluster_config(R"({
    "server": {"host": "10.0.0.1", "port": 29500},
    "nodes": [{"host": "10.0.0.2", "port": 29501}, {"host": "10.0.0.3", "port": 29502},
              {"host": "10.0.0.4", "port": 29503}],
    "training": {"nodes": 3, "byzantine": 1, "code": "identity", "placement": "exchange"}
  })");
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->training.placement, Placement::kExchange);
  ASSERT_EQ(config->nodes.size(), 3u);
  EXPECT_EQ(config->nodes[2].host, "10.0.0.4");
  EXPECT_EQ(config->nodes[2].port, 29503);
  auto again = parse_cluster_config(to_json(*config));
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(to_json(*again), to_json(*config));

  const std::pair<const char*, const char*> cases[] = {
      {R"({"training": {"nodes": 3, "code": "identity", "placement": "exchange"}})", "address of every node"},
      {R"({"nodes": [{"port": 1}], "training": {"nodes": 3, "code": "identity"}})", "'nodes' has 1 entries"},
      {R"({"nodes": {"port": 1}})", "must be an array"},
      {R"({"nodes": [{"host": "a"}]})", "needs a port"},
      {R"({"nodes": [{"port": 1, "name": "x"}]})", "unknown key 'name'"},
  };
  for (const auto& [text, expected] : cases) {
    auto bad = parse_cluster_config(text);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.error().message.find(expected), std::string::npos) << bad.error().message;
  }
}

TEST(ClusterConfig, MissingFileIsNamed) {
  auto config = load_cluster_config("/nonexistent/cluster.json");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().code, ErrorCode::kNotFound);
  EXPECT_NE(config.error().message.find("/nonexistent/cluster.json"), std::string::npos);
  // A directory, or a device that never ends, is named as what it is, not "not valid JSON".
  for (const char* path : {"/tmp", "/dev/zero"}) {
    auto odd = load_cluster_config(path);
    ASSERT_FALSE(odd.ok()) << path;
    EXPECT_EQ(odd.error().message.find("not valid JSON"), std::string::npos) << odd.error().message;
    EXPECT_NE(odd.error().message.find(std::string("cluster config '") + path + "'"), std::string::npos)
        << odd.error().message;
  }
}

}  // namespace
}  // namespace ballot::runtime
