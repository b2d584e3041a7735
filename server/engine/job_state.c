/* Names of job states as the API spells them ("status" in GET /v1/jobs/{id}). */
#include "server/engine/job.h"

const char *cr_job_state_name(cr_job_state s)
{
    static const char *const names[] = {
        [CR_JOB_QUEUED] = "queued", [CR_JOB_RUNNING] = "running", [CR_JOB_DONE] = "done",
        [CR_JOB_FAILED] = "failed", [CR_JOB_CANCELLED] = "cancelled",
    };
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown";
}
