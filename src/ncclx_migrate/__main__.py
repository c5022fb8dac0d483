from ncclx_migrate._cli import main

main()
