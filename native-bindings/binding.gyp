{
  "targets": [
    {
      "target_name": "symfence_native",
      "sources": ["symfence_native.c", "spawn_group.c", "run_supervisor.c"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"],
      "defines": ["NAPI_DISABLE_CPP_EXCEPTIONS"]
    },
    {
      "target_name": "symfence_preload",
      "type": "shared_library",
      "product_prefix": "",
      "sources": ["symfence_preload.c"],
      "cflags!": ["-O3", "-O0", "-fno-omit-frame-pointer"],
      "cflags": ["-std=gnu11", "-O2", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"],
      "libraries": ["-ldl"]
    },
    {
      "target_name": "symfence_spawn_shim",
      "type": "executable",
      "sources": ["spawn_shim.c"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"]
    }
  ]
}
