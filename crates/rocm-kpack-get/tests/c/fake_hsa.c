/*
 * A fake libhsa-runtime64.so.1 for tests: the few HSA functions GPU
 * detection calls, answering from a file `fake-hsa.conf` beside the library.
 *
 * Config lines (# starts a comment; "..." quotes a word with spaces):
 *   init_status 0x1008        status hsa_init returns (default 0)
 *   hang_in_init 1            hsa_init writes its pid to fake-hsa.pid and
 *                             sleeps forever
 *   agent_callback_error 1    hsa_iterate_agents returns HSA_STATUS_ERROR
 *                             after the first agent
 *   agent cpu NAME
 *   agent gpu NAME PRODUCT ISA...   ISA names in the order reported
 *
 * Calls are logged, one name a line, to fake-hsa.log beside the library.
 * Handles are structs of one uint64_t passed by value, as in hsa.h.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum {
    HSA_STATUS_SUCCESS = 0x0,
    HSA_STATUS_INFO_BREAK = 0x1,
    HSA_STATUS_ERROR = 0x1000,
    HSA_STATUS_ERROR_INVALID_ARGUMENT = 0x1001,
    HSA_STATUS_ERROR_INVALID_AGENT = 0x1004,
    HSA_STATUS_ERROR_OUT_OF_RESOURCES = 0x1008,
    HSA_STATUS_ERROR_NOT_INITIALIZED = 0x100B,
    HSA_STATUS_ERROR_INVALID_ISA = 0x100F
} hsa_status_t;

typedef struct hsa_agent_s {
    uint64_t handle;
} hsa_agent_t;

typedef struct hsa_isa_s {
    uint64_t handle;
} hsa_isa_t;

typedef enum {
    HSA_AGENT_INFO_NAME = 0,
    HSA_AGENT_INFO_DEVICE = 17,
    HSA_AMD_AGENT_INFO_PRODUCT_NAME = 0xA009
} hsa_agent_info_t;

typedef enum { HSA_DEVICE_TYPE_CPU = 0, HSA_DEVICE_TYPE_GPU = 1 } hsa_device_type_t;

typedef enum { HSA_ISA_INFO_NAME_LENGTH = 0, HSA_ISA_INFO_NAME = 1 } hsa_isa_info_t;

#define MAX_AGENTS 16
#define MAX_ISAS 8
#define MAX_WORD 256

struct fake_agent {
    int gpu;
    char name[64];
    char product[64];
    int isa_count;
    char isas[MAX_ISAS][MAX_WORD];
};

static int initialised;
static unsigned init_status;
static int hang_in_init;
static int agent_callback_error;
static int agent_count;
static struct fake_agent agents[MAX_AGENTS];
static char directory[4096];

/* Static, so not interposed: its address identifies this copy of the library. */
static void anchor(void) {}

static void find_directory(void) {
    Dl_info info;
    if (directory[0] != '\0') {
        return;
    }
    if (dladdr((void *)&anchor, &info) == 0 || info.dli_fname == NULL) {
        snprintf(directory, sizeof directory, ".");
        return;
    }
    snprintf(directory, sizeof directory, "%s", info.dli_fname);
    char *slash = strrchr(directory, '/');
    if (slash == NULL) {
        snprintf(directory, sizeof directory, ".");
    } else {
        *slash = '\0';
    }
}

static void sibling(char *out, size_t size, const char *name) {
    find_directory();
    snprintf(out, size, "%s/%s", directory, name);
}

static void log_call(const char *name) {
    char path[4200];
    sibling(path, sizeof path, "fake-hsa.log");
    FILE *log = fopen(path, "a");
    if (log != NULL) {
        fprintf(log, "%s\n", name);
        fclose(log);
    }
}

/* Splits a line into words; "..." quotes. Returns the number of words. */
static int split(char *line, char words[][MAX_WORD], int max) {
    int count = 0;
    char *p = line;
    while (count < max) {
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        if (*p == '\0' || *p == '\n' || *p == '#') {
            break;
        }
        size_t length = 0;
        if (*p == '"') {
            p++;
            while (*p != '\0' && *p != '"') {
                if (length + 1 < MAX_WORD) {
                    words[count][length++] = *p;
                }
                p++;
            }
            if (*p == '"') {
                p++;
            }
        } else {
            while (*p != '\0' && *p != ' ' && *p != '\t' && *p != '\n') {
                if (length + 1 < MAX_WORD) {
                    words[count][length++] = *p;
                }
                p++;
            }
        }
        words[count][length] = '\0';
        count++;
    }
    return count;
}

/* Copies a word, cut to fit with its NUL. */
static void copy_word(char *out, size_t size, const char *word) {
    size_t length = strlen(word);
    if (length >= size) {
        length = size - 1;
    }
    memcpy(out, word, length);
    out[length] = '\0';
}

static void read_config(void) {
    char path[4200];
    char line[4096];
    char words[3 + MAX_ISAS][MAX_WORD];

    init_status = HSA_STATUS_SUCCESS;
    hang_in_init = 0;
    agent_callback_error = 0;
    agent_count = 0;
    sibling(path, sizeof path, "fake-hsa.conf");
    FILE *config = fopen(path, "r");
    if (config == NULL) {
        return;
    }
    while (fgets(line, sizeof line, config) != NULL) {
        int count = split(line, words, 3 + MAX_ISAS);
        if (count < 2) {
            continue;
        }
        if (strcmp(words[0], "init_status") == 0) {
            init_status = (unsigned)strtoul(words[1], NULL, 0);
        } else if (strcmp(words[0], "hang_in_init") == 0) {
            hang_in_init = atoi(words[1]);
        } else if (strcmp(words[0], "agent_callback_error") == 0) {
            agent_callback_error = atoi(words[1]);
        } else if (strcmp(words[0], "agent") == 0 && count >= 3 && agent_count < MAX_AGENTS) {
            struct fake_agent *agent = &agents[agent_count++];
            memset(agent, 0, sizeof *agent);
            agent->gpu = strcmp(words[1], "gpu") == 0;
            copy_word(agent->name, sizeof agent->name, words[2]);
            if (agent->gpu && count >= 4) {
                copy_word(agent->product, sizeof agent->product, words[3]);
                for (int i = 4; i < count && agent->isa_count < MAX_ISAS; i++) {
                    copy_word(agent->isas[agent->isa_count++], MAX_WORD, words[i]);
                }
            } else {
                copy_word(agent->product, sizeof agent->product, words[2]);
            }
        }
    }
    fclose(config);
}

hsa_status_t hsa_init(void) {
    log_call("hsa_init");
    read_config();
    if (hang_in_init) {
        char path[4200];
        sibling(path, sizeof path, "fake-hsa.pid");
        FILE *pid = fopen(path, "w");
        if (pid != NULL) {
            fprintf(pid, "%ld\n", (long)getpid());
            fclose(pid);
        }
        for (;;) {
            pause();
        }
    }
    if (init_status != HSA_STATUS_SUCCESS) {
        return (hsa_status_t)init_status;
    }
    initialised++;
    return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_shut_down(void) {
    log_call("hsa_shut_down");
    if (initialised == 0) {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    }
    initialised--;
    return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_iterate_agents(hsa_status_t (*callback)(hsa_agent_t agent, void *data),
                                void *data) {
    if (initialised == 0) {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    }
    if (callback == NULL) {
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
    for (int i = 0; i < agent_count; i++) {
        hsa_agent_t agent = {(uint64_t)(i + 1)};
        hsa_status_t status = callback(agent, data);
        if (status != HSA_STATUS_SUCCESS) {
            return status;
        }
        if (agent_callback_error) {
            return HSA_STATUS_ERROR;
        }
    }
    return HSA_STATUS_SUCCESS;
}

static struct fake_agent *agent_of(hsa_agent_t agent) {
    if (initialised == 0 || agent.handle == 0 || agent.handle > (uint64_t)agent_count) {
        return NULL;
    }
    return &agents[agent.handle - 1];
}

hsa_status_t hsa_agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void *value) {
    struct fake_agent *fake = agent_of(agent);
    if (fake == NULL) {
        return initialised ? HSA_STATUS_ERROR_INVALID_AGENT : HSA_STATUS_ERROR_NOT_INITIALIZED;
    }
    if (value == NULL) {
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
    switch ((int)attribute) {
    case HSA_AGENT_INFO_NAME:
        memset(value, 0, 64);
        memcpy(value, fake->name, strlen(fake->name));
        return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_DEVICE:
        *(hsa_device_type_t *)value = fake->gpu ? HSA_DEVICE_TYPE_GPU : HSA_DEVICE_TYPE_CPU;
        return HSA_STATUS_SUCCESS;
    case HSA_AMD_AGENT_INFO_PRODUCT_NAME:
        memset(value, 0, 64);
        memcpy(value, fake->product, strlen(fake->product));
        return HSA_STATUS_SUCCESS;
    default:
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
}

/* An ISA handle is agent number * 256 + ISA number + 1. */
hsa_status_t hsa_agent_iterate_isas(hsa_agent_t agent,
                                    hsa_status_t (*callback)(hsa_isa_t isa, void *data),
                                    void *data) {
    struct fake_agent *fake = agent_of(agent);
    if (fake == NULL) {
        return initialised ? HSA_STATUS_ERROR_INVALID_AGENT : HSA_STATUS_ERROR_NOT_INITIALIZED;
    }
    if (callback == NULL) {
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
    for (int i = 0; i < fake->isa_count; i++) {
        hsa_isa_t isa = {agent.handle * 256 + (uint64_t)i + 1};
        hsa_status_t status = callback(isa, data);
        if (status != HSA_STATUS_SUCCESS) {
            return status;
        }
    }
    return HSA_STATUS_SUCCESS;
}

static const char *isa_name_of(hsa_isa_t isa) {
    uint64_t agent = isa.handle / 256;
    uint64_t index = isa.handle % 256;
    if (initialised == 0 || agent == 0 || agent > (uint64_t)agent_count || index == 0 ||
        index > (uint64_t)agents[agent - 1].isa_count) {
        return NULL;
    }
    return agents[agent - 1].isas[index - 1];
}

hsa_status_t hsa_isa_get_info_alt(hsa_isa_t isa, hsa_isa_info_t attribute, void *value) {
    const char *name = isa_name_of(isa);
    if (name == NULL) {
        return initialised ? HSA_STATUS_ERROR_INVALID_ISA : HSA_STATUS_ERROR_NOT_INITIALIZED;
    }
    if (value == NULL) {
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
    switch ((int)attribute) {
    case HSA_ISA_INFO_NAME_LENGTH:
        /* Like ROCr: the length includes the terminating NUL. */
        *(uint32_t *)value = (uint32_t)strlen(name) + 1;
        return HSA_STATUS_SUCCESS;
    case HSA_ISA_INFO_NAME:
        memcpy(value, name, strlen(name) + 1);
        return HSA_STATUS_SUCCESS;
    default:
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
}

hsa_status_t hsa_status_string(hsa_status_t status, const char **status_string) {
    if (status_string == NULL) {
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
    switch ((int)status) {
    case HSA_STATUS_SUCCESS:
        *status_string = "HSA_STATUS_SUCCESS: The function has been executed successfully.";
        return HSA_STATUS_SUCCESS;
    case HSA_STATUS_ERROR:
        *status_string = "HSA_STATUS_ERROR: A generic error has occurred.";
        return HSA_STATUS_SUCCESS;
    case HSA_STATUS_ERROR_OUT_OF_RESOURCES:
        *status_string = "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate "
                         "the necessary resources.";
        return HSA_STATUS_SUCCESS;
    default:
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
}
