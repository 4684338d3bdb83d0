#include "runtime/cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/enforce.h"
#include "runtime/training.h"
#include "transport/pki.h"
#include "transport/tls_transport.h"

extern char** environ;

namespace ballot::runtime {
namespace {

using transport::Role;

Result<transport::TlsTransportOptions> transport_options(const ClusterConfig& config, const TrainingSetup& setup) {
  transport::TlsTransportOptions options;
  options.transport.job = config.training.job;
  BALLOT_ASSIGN_OR_RETURN(options.transport.limits, frame_limits(setup));
  // A peer whose session is up but does not read (its host unplugged: TCP retransmits for
  // minutes) fills its queue; do not let every round wait long on it (the protocol recovers a
  // lagging node through Join, not through a deep queue). A peer without a session costs no wait.
  options.transport.send_timeout = std::chrono::milliseconds(200);
  return options;
}

// A free loopback port: bind port 0, read it back, release it. The server binds it again a moment
// later; on a busy machine another process could take it in between (the server then fails with
// an error naming the address, and `ballot train` can simply be run again).
Result<std::uint16_t> free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(ErrorCode::kIo, std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    return make_error(ErrorCode::kIo, std::string("bind: ") + std::strerror(errno));
  }
  ::close(fd);
  return static_cast<std::uint16_t>(ntohs(address.sin_port));
}

}  // namespace

Result<TrainingSummary> run_server(const ClusterConfig& config, ServerOptions options) {
  BALLOT_ASSIGN_OR_RETURN(auto credentials, transport::load_credentials(config.keys, kServerId));
  BALLOT_ASSIGN_OR_RETURN(auto registry, transport::load_registry(config.keys));
  BALLOT_ASSIGN_OR_RETURN(auto data, load_training_data(config.training));
  BALLOT_ASSIGN_OR_RETURN(
      auto setup,
      make_training_setup(config.training, std::make_shared<const learning::TrainTestSplit>(std::move(data))));
  BALLOT_ASSIGN_OR_RETURN(auto tls, transport_options(config, setup));
  tls.listen_host = config.server_host;
  tls.listen_port = config.server_port;
  tls.io_threads = static_cast<int>(config.server_io_threads);
  // The run's end: the final state a node that is behind gets (one frame of the model's size)
  // and every Finish go out before the server closes, within the time one frame may take to
  // write; closing returns as soon as every session has ended.
  tls.shutdown_timeout = tls.write_timeout;
  if (!options.quarantine) options.quarantine = std::make_shared<Quarantine>();
  options.skip_absent = config.skip_absent;  // a dead node costs one deadline in 8 rounds
  if (!options.registry) options.registry = std::make_shared<const transport::Registry>(registry);
  tls.transport.observer = options.quarantine;
  BALLOT_ASSIGN_OR_RETURN(auto endpoint,
                          transport::TlsTransport::create(std::move(credentials), std::move(registry), tls));
  options.round_deadline = std::chrono::milliseconds(config.round_deadline_ms);
  options.checkpoint_path = config.checkpoint;
  options.checkpoint_every = config.checkpoint_every;
  options.relay_decisions = config.relay_decisions;
  Server server(setup, *endpoint, std::move(options));
  auto summary = server.run();
  endpoint->close();
  return summary;
}

Result<ClusterNode> open_cluster_node(const ClusterConfig& config, std::size_t node_index, NodeOptions options) {
  if (node_index >= config.training.nodes) {
    return make_error(ErrorCode::kInvalidArgument, "node index " + std::to_string(node_index) +
                                                       " is not below n = " + std::to_string(config.training.nodes));
  }
  if (options.state_dir.empty()) {
    options.state_dir = config.node_state;
    options.state_every = config.checkpoint_every;
  }
  BALLOT_ASSIGN_OR_RETURN(auto credentials, transport::load_credentials(config.keys, node_id(node_index)));
  BALLOT_ASSIGN_OR_RETURN(auto registry, transport::load_registry(config.keys));
  BALLOT_ASSIGN_OR_RETURN(auto data, load_training_data(config.training));
  BALLOT_ASSIGN_OR_RETURN(
      auto made,
      make_training_setup(config.training, std::make_shared<const learning::TrainTestSplit>(std::move(data))));
  auto setup = std::make_unique<TrainingSetup>(std::move(made));
  BALLOT_ASSIGN_OR_RETURN(auto tls, transport_options(config, *setup));
  tls.listen = false;
  tls.dial[kServerId] = transport::PeerAddress{config.server_host, config.server_port};
  if (setup->options.placement == Placement::kExchange || config.relay_decisions) {
    // Nodes send each other their partition signs or decision pieces: each listens at its
    // address, and of two nodes that exchange (either is in the other's row; every two with
    // relayed decisions), the lower id dials.
    BALLOT_ENFORCE_EQ(config.nodes.size(), config.training.nodes);  // parse_cluster_config checked it
    tls.listen = true;
    tls.listen_host = config.nodes[node_index].host;
    tls.listen_port = config.nodes[node_index].port;
    for (std::size_t j = node_index + 1; j < config.training.nodes; ++j) {
      if (config.relay_decisions || setup->code.get(node_index, j) || setup->code.get(j, node_index)) {
        tls.dial[node_id(j)] = transport::PeerAddress{config.nodes[j].host, config.nodes[j].port};
      }
    }
  }
  if (!options.registry) options.registry = std::make_shared<const transport::Registry>(registry);
  options.relayed_decisions = config.relay_decisions;
  if (!options.evidence) options.evidence = std::make_shared<Quarantine>();
  tls.transport.observer = options.evidence;  // its equivocation proofs go to the server
  BALLOT_ASSIGN_OR_RETURN(auto endpoint,
                          transport::TlsTransport::create(std::move(credentials), std::move(registry), tls));
  ClusterNode node;
  node.index = node_index;
  node.setup = std::move(setup);
  node.transport = std::move(endpoint);
  node.options = std::move(options);
  return node;
}

Result<NodeSummary> run_node(const ClusterConfig& config, std::size_t node_index, NodeOptions options) {
  BALLOT_ASSIGN_OR_RETURN(auto opened, open_cluster_node(config, node_index, std::move(options)));
  Node node(*opened.setup, node_index, *opened.transport, opened.options);
  auto summary = node.run();
  if (!summary.ok() && summary.error().code == ErrorCode::kTimeout) {
    // A server that never answered: say why, when the transport knows (a name that does not
    // resolve, a refused connection, a certificate the server does not accept).
    if (const std::string why = opened.transport->dial_error(kServerId); !why.empty()) {
      auto error = std::move(summary).error();
      error.message += " (the last attempt to reach it: " + why + ")";
      opened.transport->close();
      return error;
    }
  }
  opened.transport->close();
  return summary;
}

std::string metrics_json_line(const RoundReport& report) {
  nlohmann::json line = {
      {"round", report.round},
      {"votes", report.votes},
      {"missing", report.missing},
      {"out_of_sync", report.out_of_sync},
      {"loss", report.mean_loss},
      {"seconds", report.seconds},
      {"vote_wait_seconds", report.vote_wait_seconds},
      {"bytes_per_vote", report.bytes_per_vote},
      {"fp32_bytes", report.fp32_bytes},
      {"bytes_per_decision", report.bytes_per_decision},
      {"rejected_messages", report.rejected_messages},
      {"late_votes", report.late_votes},
      {"send_failures", report.send_failures},
      {"quarantined", report.quarantined},
  };
  if (report.evaluated) {
    line["test_accuracy"] = report.test.accuracy;
    line["test_loss"] = report.test.loss;
  }
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<LocalCluster> LocalCluster::prepare(ClusterConfig config, std::filesystem::path program,
                                           std::filesystem::path work_dir, std::vector<std::string> node_command) {
  LocalCluster cluster;
  std::error_code ec;
  std::filesystem::create_directories(work_dir, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot create '" + work_dir.string() + "': " + ec.message());
  // The CA key stays in ca/, apart from keys/, which is what the processes read.
  const auto keys = work_dir / "keys";
  const auto ca = work_dir / "ca";
  // A new CA issues every certificate (issue_node refuses to overwrite one left from another CA); a
  // work directory kept from a run with fewer nodes gets the certificates it lacks from its CA.
  // What an earlier try left when it was cut short (a kill between two files) is made anew: a CA
  // key without its certificate, and a node key without its certificate, were never handed to
  // anyone. A whole CA is never removed (without keys/ca.crt, init_ca refuses to overwrite it).
  const bool new_ca = !std::filesystem::exists(transport::ca_cert_path(keys));
  if (new_ca) {
    if (!std::filesystem::exists(transport::ca_cert_path(ca))) std::filesystem::remove(transport::ca_key_path(ca), ec);
    BALLOT_TRY(transport::init_ca(ca, keys));
  }
  for (std::size_t i = 0; i <= config.training.nodes; ++i) {
    const transport::NodeId id = i == 0 ? kServerId : node_id(i - 1);
    if (!new_ca && std::filesystem::exists(transport::node_cert_path(keys, id))) continue;
    if (!std::filesystem::exists(transport::node_cert_path(keys, id)))
      std::filesystem::remove(transport::node_key_path(keys, id), ec);
    if (!std::filesystem::exists(transport::ca_key_path(ca))) {
      return make_error(ErrorCode::kNotFound, "'" + transport::node_cert_path(keys, id).string() +
                                                  "' is missing and the CA key to issue it ('" +
                                                  transport::ca_key_path(ca).string() +
                                                  "') is gone: use a new --work-dir");
    }
    BALLOT_TRY(transport::issue_node(ca, keys, id, i == 0 ? Role::kServer : Role::kNode));
  }
  config.keys = keys;
  config.server_host = "127.0.0.1";
  BALLOT_ASSIGN_OR_RETURN(config.server_port, free_loopback_port());
  config.nodes.clear();
  if (config.training.placement == Placement::kExchange || config.relay_decisions) {
    // Exchange: every node listens too (the same way of picking ports as the server's).
    std::set<std::uint16_t> taken{config.server_port};
    for (std::size_t i = 0; i < config.training.nodes; ++i) {
      NodeAddress address;
      for (int attempt = 0; attempt < 100 && (address.port == 0 || taken.count(address.port) != 0); ++attempt) {
        BALLOT_ASSIGN_OR_RETURN(address.port, free_loopback_port());
      }
      if (taken.count(address.port) != 0)
        return make_error(ErrorCode::kIo, "no free loopback port for node " + std::to_string(i));
      taken.insert(address.port);
      config.nodes.push_back(address);
    }
  }
  cluster.cluster_file_ = work_dir / "cluster.json";
  BALLOT_TRY(save_cluster_config(cluster.cluster_file_, config));
  cluster.config_ = std::move(config);
  cluster.program_ = std::move(program);
  cluster.node_command_ = std::move(node_command);
  cluster.work_dir_ = std::move(work_dir);
  cluster.nodes_.assign(cluster.config_.training.nodes, -1);
  return cluster;
}

LocalCluster::LocalCluster(LocalCluster&& other) noexcept
    : config_(std::move(other.config_)),
      program_(std::move(other.program_)),
      node_command_(std::move(other.node_command_)),
      work_dir_(std::move(other.work_dir_)),
      cluster_file_(std::move(other.cluster_file_)),
      server_(other.server_),
      nodes_(std::move(other.nodes_)) {
  other.server_ = -1;
  other.nodes_.clear();
}

LocalCluster::~LocalCluster() {
  for (auto& pid : nodes_) {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  if (server_ > 0) {
    ::kill(server_, SIGKILL);
    ::waitpid(server_, nullptr, 0);
  }
}

Result<pid_t> LocalCluster::spawn(const std::vector<std::string>& args, const std::filesystem::path& log,
                                  const std::vector<std::string>& environment) {
  BALLOT_ENFORCE(!args.empty());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!log.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  std::vector<std::string> all = args;
  std::vector<char*> argv;
  for (auto& arg : all) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> variables = environment;
  for (char** entry = environ; *entry != nullptr; ++entry) variables.emplace_back(*entry);
  std::vector<char*> envp;
  for (auto& variable : variables) envp.push_back(variable.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int error = posix_spawnp(&pid, all.front().c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    return make_error(ErrorCode::kIo, "cannot start '" + all.front() + "': " + std::strerror(error));
  }
  return pid;
}

Status LocalCluster::start_server(bool show_output) {
  BALLOT_ASSIGN_OR_RETURN(server_, spawn({program_.string(), "server", "--cluster", cluster_file_.string()},
                                         show_output ? std::filesystem::path() : work_dir_ / "server.log"));
  return {};
}

Status LocalCluster::start_node(std::size_t index) {
  if (index >= nodes_.size()) return make_error(ErrorCode::kInvalidArgument, "no node " + std::to_string(index));
  if (nodes_[index] > 0) kill_node(index);
  const auto log = work_dir_ / ("node-" + std::to_string(index) + ".log");
  if (node_command_.empty()) {
    BALLOT_ASSIGN_OR_RETURN(
        nodes_[index],
        spawn({program_.string(), "node", "--cluster", cluster_file_.string(), "--index", std::to_string(index)}, log));
  } else {
    std::vector<std::string> environment{std::string(kClusterFileVariable) + "=" + cluster_file_.string(),
                                         std::string(kNodeIndexVariable) + "=" + std::to_string(index)};
    for (const auto& [name, value] : {std::pair{"MALLOC_MMAP_THRESHOLD_", kRoundBufferMmapThreshold},
                                      std::pair{"MALLOC_TRIM_THRESHOLD_", kRoundBufferTrimThreshold},
                                      std::pair{"MALLOC_TOP_PAD_", kRoundBufferTopPad}}) {
      if (std::getenv(name) == nullptr) environment.push_back(std::string(name) + "=" + std::to_string(value));
    }
    BALLOT_ASSIGN_OR_RETURN(nodes_[index], spawn(node_command_, log, environment));
  }
  return {};
}

Status LocalCluster::start_all_nodes() {
  for (std::size_t i = 0; i < nodes_.size(); ++i) BALLOT_TRY(start_node(i));
  return {};
}

void LocalCluster::kill_node(std::size_t index) {
  if (index < nodes_.size() && nodes_[index] > 0) {
    ::kill(nodes_[index], SIGKILL);
    ::waitpid(nodes_[index], nullptr, 0);
    nodes_[index] = -1;
  }
}

void LocalCluster::kill_server() {
  if (server_ > 0) {
    ::kill(server_, SIGKILL);
    ::waitpid(server_, nullptr, 0);
    server_ = -1;
  }
}

Result<int> LocalCluster::wait(std::chrono::milliseconds grace, const std::atomic<bool>* stop) {
  if (server_ <= 0) return make_error(ErrorCode::kInvalidArgument, "the server is not running");
  int status = 0;
  bool stopping = false;
  while (true) {
    if (stop != nullptr && stop->load() && !stopping) {
      stopping = true;
      ::kill(server_, SIGTERM);
    }
    if (::waitpid(server_, &status, 0) >= 0) break;
    if (errno != EINTR) return make_error(ErrorCode::kIo, std::string("waitpid: ") + std::strerror(errno));
  }
  server_ = -1;
  const auto give_up = std::chrono::steady_clock::now() + (stopping ? std::chrono::milliseconds(0) : grace);
  for (auto& pid : nodes_) {
    while (pid > 0) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = -1;
      } else if (std::chrono::steady_clock::now() >= give_up) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        pid = -1;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace ballot::runtime
