#pragma once

/// @file
/// What the launcher of this process (Slurm's srun, MPICH's Hydra mpiexec, Open MPI's mpirun, a PMIx
/// server) announced in the environment, so dtrain::Environment can refuse a wrong launch: a program built
/// with one MPI started by another MPI's launcher (or by srun without the right --mpi plugin) runs as N
/// independent single processes that each train alone. Internals in dtrain::detail; the decision is a pure
/// function of the variables and MPI's world size so it can be tested without a launcher.

#include <cerrno>
#include <cstdlib>
#include <map>
#include <string>

#include <unistd.h>

#include <mpi.h>

#include <dtrain/core/error.hpp>

namespace dtrain::detail {

/// Environment variables by name (only those launch_info reads need to be present).
using EnvironmentMap = std::map<std::string, std::string>;

/// What a launcher announced about the processes it started.
struct LaunchInfo {
    std::string launcher;  ///< e.g. "srun" or "Open MPI's mpirun"; "" when no known launcher is seen
    long size = 0;         ///< processes the launcher started (0: not announced)
    long rank = -1;        ///< this process's index among them (-1: not announced)
};

/// The variables launch_info() reads and DTRAIN_ALLOW_SINGLETON.
inline constexpr const char* launcher_variables[] = {"OMPI_COMM_WORLD_SIZE",
                                                     "OMPI_COMM_WORLD_RANK",
                                                     "PMI_SIZE",
                                                     "PMI_RANK",
                                                     "PMIX_RANK",
                                                     "SLURM_STEP_NUM_TASKS",
                                                     "SLURM_NTASKS",
                                                     "SLURM_PROCID",
                                                     "DTRAIN_ALLOW_SINGLETON"};

/// The value of `name` in `env` as a non-negative integer, or -1 when it is absent or not such a number.
inline long environment_number(const EnvironmentMap& env, const char* name) {
    const auto it = env.find(name);
    if (it == env.end() || it->second.empty()) return -1;
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(it->second.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v < 0) return -1;
    return v;
}

/// The launcher that started this process and what it announced, from its variables. The MPI launchers'
/// own variables come first, because they describe the launch of this very process, while Slurm's may be
/// inherited from an allocation in which mpiexec runs:
/// - Open MPI's mpirun (and prterun): OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK;
/// - a PMI-1/PMI-2 launcher (MPICH's Hydra mpiexec, srun --mpi=pmi2): PMI_SIZE, PMI_RANK;
/// - srun: SLURM_STEP_NUM_TASKS (else SLURM_NTASKS) with SLURM_PROCID;
/// - a PMIx server without those (srun --mpi=pmix): PMIX_RANK, size not announced.
inline LaunchInfo launch_info(const EnvironmentMap& env) {
    const bool slurm = environment_number(env, "SLURM_PROCID") >= 0;
    if (environment_number(env, "OMPI_COMM_WORLD_SIZE") >= 0)
        return {"Open MPI's mpirun", environment_number(env, "OMPI_COMM_WORLD_SIZE"),
                environment_number(env, "OMPI_COMM_WORLD_RANK")};
    if (environment_number(env, "PMI_SIZE") >= 0)
        return {slurm ? "srun (PMI)" : "MPICH's mpiexec (Hydra)", environment_number(env, "PMI_SIZE"),
                environment_number(env, "PMI_RANK")};
    if (slurm) {
        long n = environment_number(env, "SLURM_STEP_NUM_TASKS");
        if (n < 0) n = environment_number(env, "SLURM_NTASKS");
        if (n >= 0) return {"srun", n, environment_number(env, "SLURM_PROCID")};
    }
    if (environment_number(env, "PMIX_RANK") >= 0)
        return {"a PMIx launcher", 0, environment_number(env, "PMIX_RANK")};
    return {};
}

/// The first line of MPI_Get_library_version (callable before MPI_Init), e.g. "MPICH Version: 4.0.2".
inline std::string mpi_library_name() {
    char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    if (MPI_Get_library_version(buf, &len) != MPI_SUCCESS) return "an unknown MPI library";
    std::string s(buf, std::size_t(len > 0 ? len : 0));
    s = s.substr(0, s.find_first_of("\r\n"));
    std::string name;  // runs of blanks (MPICH writes "Version:<tab>") become one space
    for (const char c : s)
        if (c == ' ' || c == '\t' || c == '\0') {
            if (!name.empty() && name.back() != ' ') name += ' ';
        } else {
            name += c;
        }
    while (!name.empty() && name.back() == ' ')
        name.pop_back();
    return name.empty() ? std::string("an unknown MPI library") : name;
}

/// The message dtrain::Environment fails with when the launcher started `launch.size` > 1 processes but
/// MPI sees `world_size` == 1 (every process would run alone), naming the launcher, `library` (the MPI this
/// program is built with, mpi_library_name()) and the fix; "" when the launch is consistent, when the
/// launcher is unknown, or when `env` sets DTRAIN_ALLOW_SINGLETON=1 (independent runs on purpose).
inline std::string singleton_error(const EnvironmentMap& env, int world_size, const std::string& library) {
    const auto allow = env.find("DTRAIN_ALLOW_SINGLETON");
    if (allow != env.end() && allow->second == "1") return "";
    const LaunchInfo launch = launch_info(env);
    if (world_size != 1 || launch.size <= 1) return "";
    const bool mpich = library.find("MPICH") != std::string::npos;
    const bool open_mpi = library.find("Open MPI") != std::string::npos;
    const std::string mpiexec = mpich      ? "MPICH: mpiexec.mpich or mpiexec.hydra"
                                : open_mpi ? "Open MPI: mpiexec.openmpi or mpirun.openmpi"
                                           : "the mpiexec installed with it";
    const std::string srun = mpich      ? "`srun --mpi=pmi2`"
                             : open_mpi ? "`srun --mpi=pmix`"
                                        : "`srun --mpi=pmi2` (MPICH) or `srun --mpi=pmix` (Open MPI)";
    return concat("dtrain: started by ", launch.launcher, " as ", launch.size,
                  " processes but MPI sees 1 process (this is process ", launch.rank,
                  "): the launcher and the MPI this program is built with (", library,
                  ") do not understand each other, so every process would train alone. Start it with the ",
                  "mpiexec of that MPI (", mpiexec, "), or under Slurm with ", srun,
                  ". Set DTRAIN_ALLOW_SINGLETON=1 to run independent single processes on purpose");
}

/// This machine's host name (gethostname), or "an unknown host".
inline std::string host_name() {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "an unknown host";
    return buf;
}

/// This process's launcher variables (launcher_variables) as an EnvironmentMap.
inline EnvironmentMap launcher_environment() {
    EnvironmentMap env;
    for (const char* name : launcher_variables)
        if (const char* v = std::getenv(name)) env[name] = v;
    return env;
}

}  // namespace dtrain::detail
