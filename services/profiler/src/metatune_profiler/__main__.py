from .app import service

service.run()
