// Which launcher started a process and when dtrain::Environment refuses the launch (core/launcher.hpp): a
// pure function of the launcher's variables, MPI's world size and the MPI library's name.
#include <catch2/catch.hpp>

#include <string>

#include <dtrain/core/launcher.hpp>

namespace {

using dtrain::detail::EnvironmentMap;
using dtrain::detail::launch_info;
using dtrain::detail::singleton_error;

const std::string mpich = "MPICH Version: 4.0.2";
const std::string open_mpi = "Open MPI v4.1.4, package: Debian OpenMPI";

bool has(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("launch_info reads each launcher's variables, the MPI launchers' first", "[core][launcher]") {
    const auto hydra = launch_info({{"PMI_SIZE", "4"}, {"PMI_RANK", "3"}});
    CHECK(hydra.launcher == "MPICH's mpiexec (Hydra)");
    CHECK(hydra.size == 4);
    CHECK(hydra.rank == 3);
    const auto ompi =
        launch_info({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"PMIX_RANK", "1"}});
    CHECK(ompi.launcher == "Open MPI's mpirun");
    CHECK(ompi.size == 2);
    CHECK(ompi.rank == 1);
    const auto srun =
        launch_info({{"SLURM_STEP_NUM_TASKS", "8"}, {"SLURM_NTASKS", "16"}, {"SLURM_PROCID", "5"}});
    CHECK(srun.launcher == "srun");
    CHECK(srun.size == 8);  // the step's tasks, not the allocation's
    CHECK(srun.rank == 5);
    CHECK(launch_info({{"SLURM_NTASKS", "16"}, {"SLURM_PROCID", "0"}}).size == 16);
    // Without SLURM_PROCID the Slurm variables describe an allocation, not a launch of this process.
    CHECK(launch_info({{"SLURM_NTASKS", "16"}}).launcher.empty());
    // mpiexec inside a Slurm allocation: the MPI launcher's variables describe this process.
    CHECK(launch_info({{"OMPI_COMM_WORLD_SIZE", "2"}, {"SLURM_NTASKS", "16"}, {"SLURM_PROCID", "0"}}).size ==
          2);
    CHECK(launch_info({{"PMI_SIZE", "3"}, {"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_PROCID", "0"}}).size == 3);
    CHECK(launch_info({{"PMI_SIZE", "3"}, {"SLURM_PROCID", "0"}}).launcher == "srun (PMI)");
    // A PMIx server alone announces no size.
    const auto pmix = launch_info({{"PMIX_RANK", "2"}});
    CHECK(pmix.size == 0);
    CHECK(pmix.rank == 2);
    // No launcher, or values that are not counts.
    CHECK(launch_info({}).launcher.empty());
    CHECK(launch_info({{"PMI_SIZE", "four"}}).launcher.empty());
    CHECK(launch_info({{"PMI_SIZE", "-2"}}).launcher.empty());
    CHECK(launch_info({{"PMI_SIZE", ""}}).launcher.empty());
}

TEST_CASE("singleton_error names the launcher, the MPI and the fix when N processes see one",
          "[core][launcher]") {
    // A program built with MPICH started by Open MPI's mpirun.
    const std::string e =
        singleton_error({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}}, 1, mpich);
    CHECK(has(
        e, "dtrain: started by Open MPI's mpirun as 2 processes but MPI sees 1 process (this is process 1)"));
    CHECK(has(e, "(MPICH Version: 4.0.2)"));
    CHECK(has(e, "mpiexec.mpich"));
    CHECK(has(e, "DTRAIN_ALLOW_SINGLETON=1"));
    // A program built with Open MPI started by Hydra.
    const std::string h = singleton_error({{"PMI_SIZE", "4"}, {"PMI_RANK", "0"}}, 1, open_mpi);
    CHECK(has(h, "started by MPICH's mpiexec (Hydra) as 4 processes"));
    CHECK(has(h, "mpiexec.openmpi"));
    CHECK(has(h, "`srun --mpi=pmix`"));
    // srun without the MPI's plugin.
    const std::string s = singleton_error(
        {{"SLURM_NTASKS", "2"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "0"}}, 1, mpich);
    CHECK(has(s, "started by srun as 2 processes but MPI sees 1 process"));
    CHECK(has(s, "`srun --mpi=pmi2`"));
    CHECK(has(singleton_error({{"PMI_SIZE", "2"}}, 1, "SomeMPI 1.0"), "the mpiexec installed with it"));
}

TEST_CASE("singleton_error accepts consistent launches, unknown launchers and the opt-out",
          "[core][launcher]") {
    CHECK(singleton_error({{"PMI_SIZE", "2"}}, 2, mpich).empty());
    CHECK(singleton_error({{"PMI_SIZE", "1"}}, 1, mpich).empty());
    CHECK(singleton_error({}, 1, mpich).empty());  // started directly: a deliberate single process
    CHECK(singleton_error({{"PMIX_RANK", "0"}}, 1, mpich).empty());
    CHECK(
        singleton_error({{"OMPI_COMM_WORLD_SIZE", "2"}, {"DTRAIN_ALLOW_SINGLETON", "1"}}, 1, mpich).empty());
    CHECK_FALSE(
        singleton_error({{"OMPI_COMM_WORLD_SIZE", "2"}, {"DTRAIN_ALLOW_SINGLETON", "0"}}, 1, mpich).empty());
}

TEST_CASE("mpi_library_name is the library's first line with single spaces", "[core][launcher]") {
    const std::string name = dtrain::detail::mpi_library_name();
    CHECK_FALSE(name.empty());
    CHECK(name.find_first_of("\t\r\n") == std::string::npos);
    CHECK(name.find("  ") == std::string::npos);
    CHECK_FALSE(dtrain::detail::host_name().empty());
}
